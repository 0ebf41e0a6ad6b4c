"""The fast judge client: OpenAI's chat-completions wire format, posted as the OpenAI SDK posts it.

litellm decides what a model string means, once per judge (`resolve_route`): the provider, the base
URL and key it would use, the request parameters it would send (its own `get_optional_params`), and
the model's prices. For the models whose request it would send unchanged, `openai_route.light_route`
gives the same answer without importing litellm (seconds), so the fast path never imports it until a
judge call fails (its error is then mapped by litellm, imported on a worker thread). The per-call
work is ours: a judge call costs one HTTP post with the SDK's headers (`direct_wire`; the SDK's own
client where the environment proxies the base URL) and one `json.loads`, not litellm's request
pipeline, logging and per-call cost calculation (about 3x the client CPU, measured in ``benchmarks/bench_core.py``).

Errors keep litellm's types and messages: an SDK error is wrapped as litellm's openai handler
wraps it and mapped by litellm's own `exception_type`, so retries, Retry-After and the stored
``error_type`` are the same on both paths (``tests/judges/test_fast_judge.py`` runs both side by side).

The wire is held to two limits litellm's path does not have. A redirect is never followed: a client
that followed it would re-send the prompt to whatever the Location names (another origin included), so any 3xx is a
`JudgeUnavailable` naming where it pointed (set ``api_base`` to the final URL). A reply is read in
pieces up to ``max_reply_bytes`` (`MAX_REPLY_BYTES`, 4 MiB, by default): a longer one (or one that
declares a longer Content-Length) is a `JudgeUnavailable` naming the limit, and reading stops there.

A model goes the slow way, through ``litellm.acompletion``, when anything makes litellm do more
than send the request: another provider, extra ``litellm_kwargs``, litellm callbacks or global
settings (``litellm.api_key``, ``litellm.headers``...), a model litellm routes to the Responses API,
``$OPENAI_ORGANIZATION``, parameters litellm refuses for the model, no API key, or
``JUDGEHOOKS_FAST_JUDGE=0`` / ``LiteLLMJudge(fast_path=False)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
import weakref
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import urljoin, urlsplit

from .._base.record import Mode
from .._base.secrets import remember
from ..exceptions import JudgeUnavailable, MalformedVerdict
from .base import JudgeReply
from .direct_wire import DirectClient, read_capped, usable
from .prompt import verdict_schema

#: the largest judge reply read, in bytes, unless a judge is given another `max_reply_bytes`
MAX_REPLY_BYTES = 4 * 1024 * 1024
# The SDK's own switch for "hand me the response unread" (what its `with_streaming_response` sets).
_UNREAD = {"X-Stainless-Raw-Response": "stream"}

# What LiteLLMJudge itself puts in its call kwargs; anything else is a litellm option we leave to litellm.
_OWN_KWARGS = frozenset({"timeout", "max_retries", "num_retries", "api_base", "api_key", "temperature"})
# litellm's module-level settings that change what a call sends or does besides sending it.
_LITELLM_GLOBALS = ("api_key", "openai_key", "api_base", "headers", "organization", "callbacks",
                    "success_callback", "failure_callback", "_async_success_callback", "_async_failure_callback",
                    "input_callback", "service_callback", "drop_params", "modify_params", "return_response_headers",
                    "route_all_chat_openai_to_responses", "enable_preview_features")


_import_lock = threading.Lock()  # litellm imported by one thread at a time: its lazy submodules race
_mapping: tuple[Any, Any] | None = None  # litellm's exception_type and OpenAIError, once imported


def load_litellm() -> Any:
    """Import litellm on first use (it takes seconds) with its remote price-list fetch turned off."""
    with _import_lock:
        loaded: Any = sys.modules.get("litellm")
        if loaded is None or not getattr(loaded, "suppress_debug_info", False):
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm as loaded

            # litellm prints a "Give Feedback" banner on every error; a hook must never print.
            loaded.suppress_debug_info = True
        return loaded


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


def litellm_configured() -> bool:
    """True when a litellm callback or module setting is set: litellm must then make the call (checked
    per call, so a callback set after the first judge call still sees every later one). A litellm the
    application never imported has none."""
    litellm = sys.modules.get("litellm")
    return litellm is not None and any(getattr(litellm, name, None) for name in _LITELLM_GLOBALS)


def fast_path_enabled() -> bool:
    """False when ``$JUDGEHOOKS_FAST_JUDGE`` is 0, false, no or off."""
    return os.environ.get("JUDGEHOOKS_FAST_JUDGE", "1").strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class Price:
    """USD per token, from litellm's price table, looked up once per model."""

    prompt: float
    completion: float
    cached_prompt: float | None = None

    def cost(self, usage: Mapping[str, Any]) -> float:
        prompt = _int(usage.get("prompt_tokens")) or 0
        completion = _int(usage.get("completion_tokens")) or 0
        details = usage.get("prompt_tokens_details")
        cached = (_int(details.get("cached_tokens")) or 0) if isinstance(details, Mapping) else 0
        cached = min(cached, prompt) if self.cached_prompt is not None else 0
        return ((prompt - cached) * self.prompt + cached * (self.cached_prompt or 0.0)
                + completion * self.completion)


@dataclass(frozen=True, slots=True)
class WireRoute:
    """Where and how one judge model is asked, resolved once by litellm."""

    model: str  # litellm's model string, e.g. openai/gpt-4o-mini
    wire_model: str  # the id sent on the wire, provider prefix removed
    base_url: str
    api_key: str = field(repr=False)  # never in a repr: routes show up in logs and tracebacks
    organization: str | None
    timeout: float
    params: Mapping[str, Mapping[str, Any]]  # per mode and structured output: the body's extra keys
    price: Price | None
    max_reply_bytes: int = MAX_REPLY_BYTES

    def body(self, messages: list[dict[str, str]], mode: Mode, structured: bool) -> dict[str, Any]:
        return {"model": self.wire_model, "messages": messages, **self.params[f"{mode}:{structured}"]}

    async def send(self, messages: list[dict[str, str]], mode: Mode, structured: bool) -> JudgeReply:
        """One call; litellm's exception on failure."""
        client = _client(self)
        try:
            if isinstance(client, DirectClient):
                content = await client.post(self.body(messages, mode, structured), self.timeout, self.max_reply_bytes)
            else:
                content = await self._through_sdk(client, messages, mode, structured)
        except JudgeUnavailable:
            raise
        except Exception as exc:  # the SDK's error, as litellm's handler wraps and maps it
            self._refuse_redirect(exc)
            await _mapping_ready()
            _raise_mapped(self.wire_model, exc)
            raise
        try:
            return self.reply(content)
        except _BadReply as exc:  # what litellm raises for a body that is no chat completion
            await _mapping_ready()
            error = ValueError(str(exc))
            _raise_mapped(self.wire_model, error)
            raise error from None

    async def _through_sdk(self, client: Any, messages: list[dict[str, str]], mode: Mode, structured: bool) -> bytes:
        """The reply body through the SDK's own client (a proxied base URL, or no aiohttp)."""
        import httpx

        response = await client.post("/chat/completions", body=self.body(messages, mode, structured),
                                     cast_to=httpx.Response, options={
                                         "timeout": self.timeout, "follow_redirects": False, "headers": _UNREAD})
        try:
            return await read_capped(response.headers, response.aiter_bytes(), self.max_reply_bytes)
        finally:
            await response.aclose()

    def _refuse_redirect(self, exc: BaseException) -> None:
        """A 3xx (the SDK raises it as a status error once redirects are not followed): never followed."""
        status = getattr(exc, "status_code", None)
        if not isinstance(status, int) or not 300 <= status < 400:
            return
        location = str(getattr(getattr(exc, "response", None), "headers", {}).get("location") or "")
        target = urljoin(self.base_url.rstrip("/") + "/chat/completions", location) if location else "nowhere"
        same = _origin(target) == _origin(self.base_url)
        where = "the same server" if same else f"another origin ({_origin(target)})"
        raise JudgeUnavailable(
            f"the judge endpoint answered HTTP {status}, a redirect to {where}: judgehooks follows no redirect (it "
            f"would re-send the prompt there); set api_base to the URL that answers (redirect to {target[:200]})"
        ) from None

    def reply(self, content: bytes) -> JudgeReply:
        """The reply read as litellm reads it; a body that is no chat completion raises `_BadReply`,
        which `send` maps to what litellm raises for it (an InternalServerError, so retried)."""
        try:
            data = json.loads(content)
        except ValueError as exc:
            self._refuse(str(exc))
        if not isinstance(data, dict):
            self._refuse(f"Empty or invalid response from LLM endpoint. Received: {data!r}. "
                         "Check the reverse proxy or model server configuration.")
        choices = data.get("choices")
        if not isinstance(choices, list):
            self._refuse("litellm.APIError: LiteLLM: provider returned " + (
                f"'choices' that is not a list ({type(choices).__name__})" if "choices" in data
                else "a response with no 'choices'") + f". Raw keys: {list(data)}")
        if not choices:
            raise MalformedVerdict("judge reply has no choices")
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            self._refuse(f"Invalid response object: choice 0 has no message ({str(choices[0])[:200]})")
        text = message.get("content")
        found = data.get("usage")
        usage: dict[str, Any] = found if isinstance(found, dict) else {}
        model = data.get("model")
        return JudgeReply(
            text=text if isinstance(text, str) else "",
            model=model if isinstance(model, str) and model else self.wire_model,
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
            cost_usd=self.price.cost(usage) if self.price is not None and usage else None,
        )

    def _refuse(self, message: str) -> NoReturn:
        raise _BadReply(message)


class _BadReply(ValueError):
    """A reply body that is no chat completion, before litellm's mapping."""


async def _mapping_ready() -> None:
    """litellm's error mapping imported, on a worker thread the first time a call fails: an import
    of seconds must not stall the event loop."""
    if _mapping is None:
        await asyncio.to_thread(_load_mapping)


def _raise_mapped(wire_model: str, exc: BaseException) -> None:
    """Raise the exception litellm's openai handler would raise for `exc` (`_mapping_ready` first)."""
    import openai

    exception_type, OpenAIError = _mapping or _load_mapping()  # noqa: N806 (litellm's class)
    exc = _connection_error_as_such(exc)
    original: BaseException = exc
    upstream = _bare(getattr(exc, "response", None))
    if not isinstance(exc, openai.APITimeoutError):
        original = OpenAIError(status_code=getattr(exc, "status_code", 500),
                               message=getattr(exc, "message", str(exc)), response=upstream,
                               headers=getattr(upstream, "headers", None), body=getattr(exc, "body", None))
    try:
        exception_type(model=wire_model, original_exception=original,
                       custom_llm_provider="openai")
    except Exception as mapped:
        if upstream is not None:  # litellm's own path hands its caller the provider's headers (Retry-After)
            mapped.response = upstream  # type: ignore[attr-defined]
        raise


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port or {'http': 80, 'https': 443}.get(parts.scheme, '')}"


def resolve_route(litellm: Any, model: str, kwargs: Mapping[str, Any],
                  max_reply_bytes: int = MAX_REPLY_BYTES) -> WireRoute | None:
    """The fast route for this model and these call kwargs, or None when litellm must make the call."""
    if set(kwargs) - _OWN_KWARGS or litellm_configured():
        return None
    if os.environ.get("OPENAI_ORGANIZATION"):
        return None  # litellm sends it as the organization; the SDK reads OPENAI_ORG_ID, not this
    try:
        with _import_lock:
            from litellm.responses.bridge_check import responses_api_bridge_check

        wire_model, provider, _, _ = litellm.get_llm_provider(model, api_base=kwargs.get("api_base"))
        if provider != "openai":
            return None
        info, _ = responses_api_bridge_check(model=wire_model, custom_llm_provider="openai",
                                             api_base=kwargs.get("api_base"))
        if info.get("mode") == "responses":
            return None
        params = {f"{mode}:{structured}": _params(litellm, wire_model, kwargs, mode, structured)
                  for mode in ("binary", "numeric") for structured in (True, False)}
    except Exception:  # a litellm without these internals, or a model it cannot place: its own path
        return None
    api_key = kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY")
    if not api_key:
        return None  # litellm's path says which key is missing
    remember(str(api_key))  # masked wherever an error or log line would quote it
    base_url = (kwargs.get("api_base") or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
                or "https://api.openai.com/v1")

    return WireRoute(model=model, wire_model=wire_model, base_url=str(base_url), api_key=str(api_key),
                     organization=None, timeout=float(kwargs.get("timeout") or 600.0), params=params,
                     price=_price(litellm, model), max_reply_bytes=max_reply_bytes)


def _params(litellm: Any, wire_model: str, kwargs: Mapping[str, Any], mode: Mode, structured: bool) -> dict[str, Any]:
    """What litellm would put in the request body besides model and messages."""
    params = litellm.get_optional_params(model=wire_model, custom_llm_provider="openai",
                                         temperature=kwargs.get("temperature"),
                                         response_format=verdict_schema(mode) if structured else None)
    return {k: v for k, v in params.items()
            if v is not None and k not in ("max_retries", "extra_body") and not (k == "stream" and v is False)}


def _price(litellm: Any, model: str) -> Price | None:
    try:
        info = litellm.get_model_info(model)
    except Exception:  # an unpriced model: cost None, as litellm reports it
        return None
    return price_of_row(info)


def price_of_row(info: Mapping[str, Any] | None) -> Price | None:
    """The prices in one row of litellm's model table (its `get_model_info`), None when unpriced."""
    if info is None:
        return None
    prompt, completion = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if not isinstance(prompt, (int, float)) or not isinstance(completion, (int, float)):
        return None
    cached = info.get("cache_read_input_token_cost")
    return Price(float(prompt), float(completion), float(cached) if isinstance(cached, (int, float)) else None)


# One AsyncOpenAI per event loop, base URL and key: its connection pool belongs to the loop that opened it.
_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = weakref.WeakKeyDictionary()


class _LoopClients(dict[tuple[str, str], Any]):
    """The clients of one loop, closed on that loop as it shuts down (`asyncio.run` and every runner
    call `loop.shutdown_asyncgens()` before closing it). Left to the garbage collector, the SDK
    would close a client by scheduling that on whichever loop runs then, and a later
    `asyncio.run` would log "Task exception was never retrieved: Event loop is closed"."""

    def __init__(self) -> None:
        super().__init__()
        self.closer = self._close_at_shutdown()
        # Start the generator on the running loop: the loop's first-iteration hook registers it,
        # and the loop's shutdown_asyncgens() then runs its `finally` on the still-open loop.
        with contextlib.suppress(StopIteration):
            self.closer.asend(None).send(None)

    async def _close_at_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            clients = list(self.values())
            self.clear()
            for client in clients:
                with contextlib.suppress(Exception):
                    await client.close()


def _client(route: WireRoute) -> Any:
    """This loop's client for the route's base URL and key: our `DirectClient`, or the SDK's own."""
    loop = asyncio.get_running_loop()
    clients = _CLIENTS.get(loop)
    if clients is None:
        clients = _CLIENTS[loop] = _LoopClients()
    key = (route.base_url, route.api_key)
    client = clients.get(key)
    if client is None:
        import openai

        direct = usable(route.base_url)
        sdk = openai.AsyncOpenAI(base_url=route.base_url, api_key=route.api_key, max_retries=0, timeout=route.timeout,
                                 http_client=None if direct else _http_client(openai, route))
        client = clients[key] = DirectClient(sdk, route.base_url) if direct else sdk
    return client


def _http_client(openai: Any, route: WireRoute) -> Any:
    """The SDK's own client, for a base URL the environment proxies (`direct_wire` takes the rest): the
    SDK's aiohttp transport (aiohttp comes with litellm), which with many requests in flight costs
    about half the client CPU of the default httpx pool, which probes every idle connection's socket
    each time it hands out one (``benchmarks/bench_core.py``, judge process rows). It keeps the
    SDK's timeouts, limits, proxy and certificate settings from the environment, and maps aiohttp's
    errors to the same httpx ones. Without aiohttp, the SDK's default client."""
    try:
        return openai.DefaultAioHttpClient(timeout=route.timeout)
    except RuntimeError:  # the SDK found no aiohttp
        return None


def _connection_error_as_such(exc: BaseException) -> BaseException:
    """The SDK's aiohttp transport maps every aiohttp connection error (refused, reset, DNS, a server
    that hangs up) to a ConnectTimeout, so the SDK raises APITimeoutError for them. Only a timeout is
    one: the others become the APIConnectionError the default transport (and litellm) raises. Through
    the SDK's default httpx transport (an SDK without the aiohttp one) an APITimeoutError is always a
    timeout, and stays one."""
    import openai

    root = getattr(exc.__cause__, "__cause__", None)
    if (not isinstance(exc, openai.APITimeoutError) or root is None or isinstance(root, TimeoutError)
            or not type(root).__module__.startswith("aiohttp")):
        return exc
    error = openai.APIConnectionError(request=exc.request)
    error.__cause__ = root
    return error


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


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
