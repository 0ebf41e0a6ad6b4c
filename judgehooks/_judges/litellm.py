"""The default judge: any litellm model string, or any OpenAI-compatible server.

A judge has one way of calling, chosen once when it is built (`LiteLLMJudge._init_client`, as httpx's
`Client._init_transport` chooses a transport): the wire client (`wire.WireClient`, OpenAI's
chat-completions format) when litellm would send the request unchanged, else the litellm client
(`LiteLLMClient`: ``litellm.acompletion``, litellm imported on first use, on a worker thread). The
judge's repr and its ``judge_client`` log line name the client; nothing about the choice is checked
again per call.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread

from .._base.log import log
from .._base.record import JudgeMode
from .._base.secrets import remember, remember_environment
from .._base.validate import check_number, check_optional_number
from ..exceptions import JudgeUnavailable, MalformedVerdict
from .base import BaseJudge, JudgeReply, _status_of, is_auth_error, load_litellm, refuses_structured_output, shown_url
from .prompt import REPLY_TOKENS, JudgeRequest, verdict_schema
from .wire import MAX_REPLY_BYTES, WireClient, reasoning_model, wire_client


class LiteLLMClient:
    """Every call through ``litellm.acompletion``: any provider, litellm's callbacks and settings."""

    name = "litellm"

    def __init__(self, model: str, kwargs: Mapping[str, Any], *, cap_reason: bool, max_reply_bytes: int) -> None:
        self.model, self.kwargs, self.cap_reason, self.max_reply_bytes = model, kwargs, cap_reason, max_reply_bytes

    def __repr__(self) -> str:
        return f"LiteLLMClient(model={self.model!r})"

    async def send(self, messages: list[dict[str, str]], mode: JudgeMode, structured: bool) -> JudgeReply:
        schema = {"response_format": verdict_schema(mode, cap_reason=self.cap_reason)} if structured else {}
        response = await load_litellm().acompletion(model=self.model, messages=messages, **schema, **self.kwargs)
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise MalformedVerdict("judge reply has no choices")
        text = choices[0].message.content or ""
        if len(text) > self.max_reply_bytes:
            raise JudgeUnavailable(f"the judge reply is longer than max_reply_bytes={self.max_reply_bytes}")
        usage = getattr(response, "usage", None)
        cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        finish = getattr(choices[0], "finish_reason", None)
        return JudgeReply(text=text, model=getattr(response, "model", None) or self.model,
                          prompt_tokens=getattr(usage, "prompt_tokens", None),
                          completion_tokens=getattr(usage, "completion_tokens", None),
                          cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
                          finish_reason=finish if isinstance(finish, str) else None)


class LiteLLMJudge(BaseJudge):
    """Grades through litellm's rules: any provider, or any OpenAI-compatible server.

    Connection settings are passed per call; litellm's provider variables (``OPENAI_API_KEY``,
    ``OPENAI_API_BASE``...) apply when these are None. `structured_output=True` asks for a JSON
    schema response format and falls back to plain text when the server refuses it.

    The wire client (`client`) costs about a third of litellm's client CPU, and litellm is not imported
    unless a call fails. `fast_path=False` (or ``$JUDGEHOOKS_FAST_JUDGE=0``) sends every call through
    ``litellm.acompletion``.

    `max_tokens` caps the reply (default 1,024 tokens; none for a reasoning model, whose thinking
    counts against it). `max_reply_bytes` (4 MiB by default) caps a reply's size: a longer one is a
    `JudgeUnavailable` error. The wire client stops reading there and follows no redirect; through
    litellm, which reads the whole reply itself, a reply text longer than the cap is refused once read.
    """

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, temperature: float | None = None, structured_output: bool = True,
                 litellm_kwargs: Mapping[str, Any] | None = None, fast_path: bool = True,
                 max_reply_bytes: int = MAX_REPLY_BYTES, max_tokens: int | None = None) -> None:
        check_number("timeout", timeout, minimum=0, allow_equal=False)
        check_number("max_reply_bytes", max_reply_bytes, minimum=1, integer=True)
        check_optional_number("temperature", temperature, minimum=0)
        check_optional_number("max_tokens", max_tokens, minimum=1, integer=True)
        self.model = model
        self.structured_output = structured_output
        self.fast_path = fast_path
        self.max_reply_bytes = int(max_reply_bytes)
        if max_tokens is None and not reasoning_model(model):
            max_tokens = REPLY_TOKENS
        given = {"api_base": api_base, "api_key": api_key, "temperature": temperature,
                 "max_tokens": None if max_tokens is None else int(max_tokens)}
        self._kwargs: dict[str, Any] = {"timeout": timeout, "max_retries": 0, "num_retries": 0,
                                        **{key: value for key, value in given.items() if value is not None},
                                        **(litellm_kwargs or {})}
        remember(api_key)  # masked wherever an error or log line would quote it
        remember_environment()  # the provider key variables litellm reads when no api_key is given
        self.max_tokens = self._kwargs.get("max_tokens")
        self.client = self._init_client()
        log.info("judge_client", model=model, client=self.client.name, url=shown_url(self) or "the provider's default")

    def _init_client(self) -> WireClient | LiteLLMClient:
        """The one way this judge calls: the wire client if it serves the model, else litellm's."""
        base = str(self._kwargs.get("api_base") or os.environ.get("OPENAI_BASE_URL")
                   or os.environ.get("OPENAI_API_BASE") or "")
        # maxLength on the reason for an OpenAI-compatible server of one's own, which enforces it while
        # decoding; OpenAI's strict mode refuses the keyword
        cap_reason = self.model.startswith("openai/") and bool(base) and urlsplit(base).hostname != "api.openai.com"
        fast = os.environ.get("JUDGEHOOKS_FAST_JUDGE", "1").strip().lower() not in ("0", "false", "no", "off")
        wire = wire_client(self.model, self._kwargs, cap_reason=cap_reason,
                           max_reply_bytes=self.max_reply_bytes) if self.fast_path and fast else None
        return wire or LiteLLMClient(self.model, self._kwargs, cap_reason=cap_reason,
                                     max_reply_bytes=self.max_reply_bytes)

    def __repr__(self) -> str:
        return f"LiteLLMJudge(model={self.model!r}, client={self.client!r})"

    @property
    def route(self) -> WireClient | None:
        """The wire client when this judge's calls take it, else None (they go through litellm)."""
        return self.client if isinstance(self.client, WireClient) else None

    @property
    def call_kwargs(self) -> dict[str, Any]:
        """Everything passed to `litellm.acompletion` besides model and messages."""
        return dict(self._kwargs)

    @property
    def endpoint(self) -> str | None:
        """The ``api_base`` given, else the wire client's base URL, else None (the provider's default)."""
        given = self._kwargs.get("api_base")
        if isinstance(given, str) and given:
            return given
        return self.client.base_url if isinstance(self.client, WireClient) else None

    def warm_up(self) -> None:
        """Import litellm now (seconds) if the calls need it, e.g. on a side thread before the first grading."""
        if isinstance(self.client, LiteLLMClient):
            load_litellm()

    async def prepare(self) -> None:
        """Import litellm (if the calls need it) on a worker thread the first time: an import of seconds
        must neither block the event loop nor count against the first judge call's timeout."""
        if isinstance(self.client, LiteLLMClient) and "litellm" not in sys.modules:
            await anyio.to_thread.run_sync(load_litellm)

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        messages, mode = list(request.messages), request.mode
        try:
            if self.structured_output:
                try:
                    return await self.client.send(messages, mode, structured=True)
                except Exception as exc:
                    if not refuses_structured_output(exc):
                        raise
            return await self.client.send(messages, mode, structured=False)
        except Exception as exc:
            if is_auth_error(exc):  # one line naming the key to set, and no retries
                raise JudgeUnavailable(self._auth_message(exc)) from exc
            raise

    def _auth_message(self, exc: BaseException) -> str:
        """One line naming what to set: the provider's key variable, or the api_key given."""
        litellm = load_litellm()
        try:
            env = litellm.validate_environment(model=self.model, api_key=self._kwargs.get("api_key"),
                                               api_base=self._kwargs.get("api_base"))
            missing = list(env.get("missing_keys") or [])
            provider = litellm.get_llm_provider(self.model)[1]
        except Exception:  # an unknown provider: say what we can
            missing, provider = [], None
        if missing and "api_key" not in self._kwargs:
            return (f"no API key for the judge model {self.model!r}: set {' or '.join(missing)} "
                    "(or pass api_key=...); not retried")
        status = _status_of(exc)
        where = "the api_key passed to the evaluator" if "api_key" in self._kwargs else (
            f"{provider.upper()}_API_KEY" if provider else "the provider's API key variable")
        return (f"the judge model {self.model!r} refused the API key"
                f"{f' (HTTP {status})' if status in (401, 403) else ''}: check {where}; not retried")
