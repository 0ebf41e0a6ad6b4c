"""The wire client: a judge call as one HTTP post of OpenAI's chat-completions format.

`wire_client` decides once, when a `LiteLLMJudge` is built, whether its calls take this client: for
``openai/<any id>`` and for OpenAI's chat models litellm's price table lists under a bare name, when
litellm would send the request unchanged. Not for a model litellm rewrites (the Responses API,
fine-tunes, ``-latest`` aliases, a reasoning model given a temperature or a ``max_tokens``), nor with
``litellm_kwargs`` beyond the judge's own, a litellm callback or module setting, ``$OPENAI_ORGANIZATION``
or no API key, all as they stand when the judge is built: those calls go through litellm.
``tests/judges/test_wire_choice.py`` checks the body and the price against litellm's own answer for
every OpenAI chat model in that table. The table is litellm's live ``litellm.model_cost`` once the
application has imported litellm (so `litellm.register_model` counts), else the copy it ships.

How a post goes is decided once per base URL (`transport`). An error keeps the name and message
litellm gives it: litellm's own mapping (`exception_type`) is applied (`_raise_mapped`).

Two limits hold that litellm's path does not have: no redirect is followed (a 3xx is a
`JudgeUnavailable` naming where it pointed), and a reply is read up to ``max_reply_bytes``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, get_args
from urllib.parse import urljoin, urlsplit

from .._base.record import JudgeMode
from .._base.secrets import remember
from ..exceptions import JudgeUnavailable, MalformedVerdict
from .base import MAX_TOKENS, JudgeReply, _import_lock, count, load_litellm
from .prompt import verdict_schema
from .transport import poster, proxied

#: the largest judge reply read, in bytes, unless a judge is given another `max_reply_bytes`
MAX_REPLY_BYTES = 4 * 1024 * 1024
# What LiteLLMJudge itself puts in its call kwargs; anything else is a litellm option left to litellm.
OWN_KWARGS = frozenset({"timeout", "max_retries", "num_retries", "api_base", "api_key", "temperature", "max_tokens"})
# litellm's module-level settings that change what a call sends or does besides sending it.
_LITELLM_GLOBALS = ("api_key", "openai_key", "api_base", "headers", "organization", "callbacks",
                    "success_callback", "failure_callback", "_async_success_callback", "_async_failure_callback",
                    "input_callback", "service_callback", "drop_params", "modify_params", "return_response_headers",
                    "route_all_chat_openai_to_responses", "enable_preview_features")
# Model families whose parameters litellm rewrites or refuses (reasoning and audio models).
_SPECIAL = re.compile(r"^(?:o\d|gpt-5|gpt-audio|gpt-4o-audio|gpt-4o-mini-audio|gpt-realtime)|audio|realtime", re.I)
_REASONING = re.compile(r"^(?:o\d|gpt-5)", re.I)
_table: dict[str, Any] | None = None


def litellm_configured() -> bool:
    """True when a litellm callback or module setting is set (litellm must then make the calls)."""
    litellm = sys.modules.get("litellm")
    return litellm is not None and any(getattr(litellm, name, None) for name in _LITELLM_GLOBALS)


def price_table() -> Mapping[str, Any] | None:
    """litellm's model table: its live one once imported, else the copy it ships (None when the
    application asked litellm for the remote table, which only litellm fetches)."""
    litellm = sys.modules.get("litellm")
    if litellm is not None and isinstance(getattr(litellm, "model_cost", None), dict):
        return litellm.model_cost  # type: ignore[no-any-return]
    if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True").strip().lower() not in ("true", "1", "yes", "on"):
        return None
    global _table
    if _table is None:
        spec = importlib.util.find_spec("litellm")
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        try:
            loaded = json.loads((Path(folders[0]) / "model_prices_and_context_window_backup.json").read_bytes())
        except (IndexError, OSError, ValueError):
            return None
        _table = loaded if isinstance(loaded, dict) else {}
    return _table


def reasoning_model(model: str) -> bool:
    """A model that thinks before it answers (its thinking counts against ``max_tokens``), by name or
    by litellm's table."""
    bare = model.rsplit("/", 1)[-1]
    row = next((r for r in ((price_table() or {}).get(k) for k in (model, bare)) if isinstance(r, Mapping)), {})
    return bool(_REASONING.search(bare) or row.get("supports_reasoning"))


@dataclass(frozen=True, slots=True)
class Price:
    """USD per token, from litellm's price table, looked up once per model."""

    prompt: float
    completion: float
    cached_prompt: float | None = None

    def cost(self, usage: Mapping[str, Any]) -> float | None:
        """The call's cost, None when a count is out of bounds (a forged count prices nothing)."""
        prompt = count(usage.get("prompt_tokens")) or 0
        completion = count(usage.get("completion_tokens")) or 0
        details = usage.get("prompt_tokens_details")
        cached = (count(details.get("cached_tokens")) or 0) if isinstance(details, Mapping) else 0
        if min(prompt, completion, cached) < 0 or max(prompt, completion, cached) > MAX_TOKENS:
            return None  # whole numbers all three (`count`): two comparisons bound them
        cached = min(cached, prompt) if self.cached_prompt is not None else 0
        return ((prompt - cached) * self.prompt + cached * (self.cached_prompt or 0.0)
                + completion * self.completion)


def price_of_row(info: Mapping[str, Any] | None) -> Price | None:
    """The prices in one row of litellm's model table, None when unpriced."""
    if info is None:
        return None
    prompt, completion = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if not isinstance(prompt, (int, float)) or not isinstance(completion, (int, float)):
        return None
    cached = info.get("cache_read_input_token_cost")
    return Price(float(prompt), float(completion), float(cached) if isinstance(cached, (int, float)) else None)


def wire_client(model: str, kwargs: Mapping[str, Any], *, cap_reason: bool,
                max_reply_bytes: int = MAX_REPLY_BYTES) -> WireClient | None:
    """This client for a judge of `model` with these call kwargs, or None when litellm makes its calls."""
    table = price_table()
    if set(kwargs) - OWN_KWARGS or litellm_configured() or os.environ.get("OPENAI_ORGANIZATION") or table is None:
        return None
    if model.startswith("openai/"):
        wire_model = model[len("openai/"):]
    elif "/" not in model and _entry(table, model, model) is not None:
        wire_model = model  # a bare OpenAI model name litellm places by its table
    else:
        return None
    if not wire_model or wire_model.startswith(("responses/", "ft:")) or wire_model.endswith("-latest"):
        return None
    entry = _entry(table, model, wire_model)
    if entry is not None and (entry.get("mode") != "chat" or not entry.get("supports_response_schema")
                              or price_of_row(entry) is None):
        return None  # another API, no JSON schema (litellm refuses it), or no price in the row
    rewritten = _SPECIAL.search(wire_model) or (entry or {}).get("supports_reasoning")
    extra = {k: kwargs[k] for k in ("temperature", "max_tokens") if kwargs.get(k) is not None}
    if rewritten and (extra or entry is None):
        return None  # litellm renames or refuses these parameters for such a model: its rules
    api_key = kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY")
    if not api_key:
        return None  # litellm's path says which key is missing
    remember(str(api_key))  # masked wherever an error or log line would quote it
    base_url = str(kwargs.get("api_base") or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
                   or "https://api.openai.com/v1")
    params = {(mode, structured): {**extra, **(
        {"response_format": verdict_schema(mode, cap_reason=cap_reason)} if structured else {})}
        for mode in get_args(JudgeMode) for structured in (True, False)}
    return WireClient(model=model, wire_model=wire_model, base_url=base_url, api_key=str(api_key),
                      timeout=float(kwargs.get("timeout") or 600.0), params=params, price=price_of_row(entry),
                      max_reply_bytes=max_reply_bytes, proxied=proxied(base_url))


def _entry(table: Mapping[str, Any], model: str, wire_model: str) -> Mapping[str, Any] | None:
    """The model's row as litellm's `get_model_info` finds it for the openai provider."""
    for key in (model, wire_model, f"openai/{wire_model}"):
        row = table.get(key)
        if isinstance(row, Mapping) and row.get("litellm_provider") == "openai":
            return row
    return None


@dataclass(frozen=True, slots=True)
class WireClient:
    """Where and how one judge model is asked, settled when the judge is built."""

    model: str  # litellm's model string, e.g. openai/gpt-4o-mini
    wire_model: str  # the id sent on the wire, provider prefix removed
    base_url: str
    api_key: str = field(repr=False)  # never in a repr: clients show up in logs and tracebacks
    timeout: float
    params: Mapping[tuple[str, bool], Mapping[str, Any]] = field(repr=False)  # per mode and structured output
    price: Price | None = field(repr=False)
    max_reply_bytes: int = MAX_REPLY_BYTES
    proxied: bool = False  # posted by the SDK's own client, which applies the environment's proxy rules

    name = "wire"

    async def send(self, messages: list[dict[str, str]], mode: JudgeMode, structured: bool) -> JudgeReply:
        """One call; on failure, the exception litellm raises for it."""
        try:
            content = await poster(self.base_url, self.api_key, self.timeout, self.proxied).post(
                {"model": self.wire_model, "messages": messages, **self.params[(mode, structured)]}, self.timeout,
                self.max_reply_bytes)
        except JudgeUnavailable:
            raise
        except Exception as exc:  # the SDK's error, as litellm's handler wraps and maps it
            self._refuse_redirect(exc)
            await _raise_mapped(self.wire_model, exc)
        try:
            return self.reply(content)
        except _BadReply as exc:  # what litellm raises for a body that is no chat completion
            await _raise_mapped(self.wire_model, ValueError(str(exc)))

    def _refuse_redirect(self, exc: BaseException) -> None:
        """A 3xx (the SDK's status error, as no redirect is followed): never followed, never retried.
        httpx before 0.29 reads a 3xx's Location even so, and fails on one it cannot parse: refused too."""
        status, cause = getattr(exc, "status_code", None), exc.__cause__
        if type(cause).__name__ == "RemoteProtocolError" and "location header" in str(cause):
            status, target, where = "3xx", str(cause), "a URL that cannot be read"
        elif isinstance(status, int) and 300 <= status < 400:
            location = str(getattr(getattr(exc, "response", None), "headers", {}).get("location") or "")
            try:
                target = urljoin(self.base_url.rstrip("/") + "/chat/completions", location) if location else "nowhere"
                origin = _origin(target)
                where = "the same server" if origin == _origin(self.base_url) else f"another origin ({origin})"
            except ValueError:  # a port out of range, an IPv6 host never closed: no origin to name
                target, where = location, "a URL that cannot be read"
        else:
            return
        raise JudgeUnavailable(
            f"the judge endpoint answered HTTP {status}, a redirect to {where}: judgehooks follows no redirect (it "
            f"would re-send the prompt there); set api_base to the URL that answers (redirect to {target[:200]})"
        ) from None

    def reply(self, content: bytes) -> JudgeReply:
        """The reply read as litellm reads it; a body that is no chat completion raises `_BadReply`
        with litellm's words, which `send` maps as litellm does (an InternalServerError, so retried)."""
        try:
            data = json.loads(content)
        except ValueError as exc:
            raise _BadReply(str(exc)) from exc
        if not isinstance(data, dict):
            raise _BadReply(f"Empty or invalid response from LLM endpoint. Received: {data!r}. "
                    "Check the reverse proxy or model server configuration.")
        choices = data.get("choices")
        if not isinstance(choices, list):
            raise _BadReply("litellm.APIError: LiteLLM: provider returned " + (
                f"'choices' that is not a list ({type(choices).__name__})" if "choices" in data
                else "a response with no 'choices'") + f". Raw keys: {list(data)}")
        if not choices:
            raise MalformedVerdict("judge reply has no choices")
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise _BadReply(f"Invalid response object: choice 0 has no message ({str(choices[0])[:200]})")
        text, model, finish = message.get("content"), data.get("model"), choices[0].get("finish_reason")
        found = data.get("usage")
        usage: dict[str, Any] = found if isinstance(found, dict) else {}
        return JudgeReply(
            text=text if isinstance(text, str) else "",
            model=model if isinstance(model, str) and model else self.wire_model,
            prompt_tokens=count(usage.get("prompt_tokens")),
            completion_tokens=count(usage.get("completion_tokens")),
            cost_usd=self.price.cost(usage) if self.price is not None and usage else None,
            finish_reason=finish if isinstance(finish, str) else None,
        )


class _BadReply(ValueError):
    """A reply body that is no chat completion, before litellm's mapping."""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port or {'http': 80, 'https': 443}.get(parts.scheme, '')}"


_mapping: tuple[Any, Any] | None = None  # litellm's exception_type and OpenAIError, once imported


def _load_mapping() -> tuple[Any, Any]:
    """litellm's error mapping, imported once (by one thread)."""
    global _mapping
    load_litellm()
    with _import_lock:
        if _mapping is None:
            from litellm.litellm_core_utils.exception_mapping_utils import exception_type
            from litellm.llms.openai.common_utils import OpenAIError

            _mapping = (exception_type, OpenAIError)
        return _mapping


async def _raise_mapped(wire_model: str, exc: BaseException) -> NoReturn:
    """Raise what litellm's openai handler raises for `exc`: the same class and message, with the
    provider's response and its headers. litellm's mapping is imported on a worker thread at the first
    failure: an import of seconds must not stall the event loop, and calls that all succeed never need it."""
    import openai

    mapping = _mapping if _mapping is not None else await asyncio.to_thread(_load_mapping)
    exception_type, OpenAIError = mapping  # noqa: N806 (litellm's class)
    original: BaseException = exc
    upstream = _bare(getattr(exc, "response", None))
    if not isinstance(exc, openai.APITimeoutError):
        original = OpenAIError(status_code=getattr(exc, "status_code", 500),
                               message=getattr(exc, "message", str(exc)), response=upstream,
                               headers=getattr(upstream, "headers", None), body=getattr(exc, "body", None))
    try:
        exception_type(model=wire_model, original_exception=original, custom_llm_provider="openai")
    except Exception as mapped:
        if upstream is not None:  # litellm's own path hands its caller the provider's headers (Retry-After)
            mapped.response = upstream  # type: ignore[attr-defined]
        raise
    raise exc


def _bare(upstream: Any) -> Any:
    """The provider's error response (the SDK's, an httpx or httpx2 Response) as an httpx Response with
    its status, headers (Retry-After) and body, and a request without the SDK's credentials."""
    import httpx

    status, headers = getattr(upstream, "status_code", None), getattr(upstream, "headers", None)
    if not isinstance(status, int) or headers is None:
        return None
    request = getattr(upstream, "_request", None)
    bare = httpx.Request(str(request.method), str(request.url)) if request is not None else None
    return httpx.Response(status, headers=list(headers.items()), content=bytes(upstream.content), request=bare)
