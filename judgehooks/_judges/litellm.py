"""The default judge: any litellm model string, or any OpenAI-compatible server.

litellm is imported on first use (the import takes seconds), and only when a call needs it: the
fast OpenAI-compatible route resolves without it (`openai_route`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Literal

import anyio.to_thread

from .._base.record import Mode
from .._base.secrets import remember, remember_environment
from .._base.validate import check_number, check_optional_number
from ..exceptions import JudgeUnavailable, MalformedVerdict
from .base import BaseJudge, JudgeReply, _status_of, is_auth_error, refuses_structured_output
from .openai_route import light_route
from .openai_wire import (
    MAX_REPLY_BYTES,
    WireRoute,
    fast_path_enabled,
    litellm_configured,
    load_litellm,
    resolve_route,
)
from .prompt import JudgeRequest, verdict_schema


class LiteLLMJudge(BaseJudge):
    """Grades through ``litellm.acompletion``: any provider, or any OpenAI-compatible server.

    Connection settings are passed per call; litellm's provider variables (``OPENAI_API_KEY``,
    ``OPENAI_API_BASE``...) apply when these are None. `structured_output=True` asks for a JSON
    schema response format and falls back to plain text when the server refuses it.

    OpenAI's own models and OpenAI-compatible servers (``openai/...`` with an ``api_base``, the
    local model) are sent straight through the OpenAI SDK: the same request, records and error types
    for about a third of the client CPU, and litellm is not imported unless a call fails. `fast_path=False` (or
    ``$JUDGEHOOKS_FAST_JUDGE=0``) sends every call through ``litellm.acompletion``.

    `max_reply_bytes` (4 MiB by default) caps a reply: a longer one is a `JudgeUnavailable` error.
    The fast client stops reading there and follows no redirect; through litellm, which reads the
    whole reply itself, a reply text (the judge's message) longer than the cap is refused once read.
    """

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, temperature: float | None = None, structured_output: bool = True,
                 litellm_kwargs: Mapping[str, Any] | None = None, fast_path: bool = True,
                 max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        check_number("timeout", timeout, minimum=0, allow_equal=False)
        check_number("max_reply_bytes", max_reply_bytes, minimum=1, integer=True)
        self.max_reply_bytes = int(max_reply_bytes)
        check_optional_number("temperature", temperature, minimum=0)
        self.model = model
        self.structured_output = structured_output
        self.fast_path = fast_path
        self._route: WireRoute | None | Literal[False] = False  # False: not resolved yet
        kwargs: dict[str, Any] = {"timeout": timeout, "max_retries": 0, "num_retries": 0}
        if api_base is not None:
            kwargs["api_base"] = api_base
        if api_key is not None:
            kwargs["api_key"] = api_key
        remember(api_key)  # masked wherever an error or log line would quote it
        remember_environment()  # the provider key variables litellm reads when no api_key is given
        if temperature is not None:
            kwargs["temperature"] = temperature
        kwargs.update(litellm_kwargs or {})
        self._kwargs = kwargs

    @property
    def call_kwargs(self) -> dict[str, Any]:
        """Everything passed to `litellm.acompletion` besides model and messages."""
        return dict(self._kwargs)

    def warm_up(self) -> None:
        """Resolve the route now, importing litellm (seconds) if the calls need it, e.g. on a side
        thread before the first grading."""
        if self.route is None:
            load_litellm()

    async def prepare(self) -> None:
        """Resolve the route (and import litellm, if the calls need it) on a worker thread the first
        time: an import of seconds must neither block the event loop nor count against the first
        judge call's timeout."""
        if self._route is False or (self._route is None and "litellm" not in sys.modules):
            await anyio.to_thread.run_sync(self.warm_up)

    @property
    def endpoint(self) -> str | None:
        """The ``api_base`` given, else the base URL litellm resolved (once resolved), else None."""
        given = self._kwargs.get("api_base")
        if isinstance(given, str) and given:
            return given
        route = self._route
        return route.base_url if route else None

    @property
    def route(self) -> WireRoute | None:
        """The fast route litellm resolved for this judge, or None when calls go through litellm."""
        if self._route is False:
            route = None
            if self.fast_path and fast_path_enabled():
                route = light_route(self.model, self._kwargs, self.max_reply_bytes)
                if route is None:  # litellm decides the models the light route does not know
                    route = resolve_route(load_litellm(), self.model, self._kwargs, self.max_reply_bytes)
            self._route = route
        return self._route

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        messages, mode = list(request.messages), request.mode
        try:
            if self.structured_output:
                try:
                    return await self._send(messages, mode, structured=True)
                except Exception as exc:
                    if not refuses_structured_output(exc):
                        raise
            return await self._send(messages, mode, structured=False)
        except Exception as exc:
            if is_auth_error(exc):  # one line naming the key to set, and no retries
                raise JudgeUnavailable(self._auth_message(exc)) from exc
            raise

    async def _send(self, messages: list[dict[str, str]], mode: Mode, *, structured: bool) -> JudgeReply:
        route = self.route
        if route is not None and not litellm_configured():
            return await route.send(messages, mode, structured)
        schema = {"response_format": verdict_schema(mode)} if structured else {}
        response = await load_litellm().acompletion(model=self.model, messages=messages, **schema, **self._kwargs)
        reply = _reply_from_litellm(response, self.model)
        if len(reply.text) > self.max_reply_bytes:
            raise JudgeUnavailable(f"the judge reply is longer than max_reply_bytes={self.max_reply_bytes}")
        return reply

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


def _reply_from_litellm(response: Any, model: str) -> JudgeReply:
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise MalformedVerdict("judge reply has no choices")
    text = choices[0].message.content or ""
    usage = getattr(response, "usage", None)
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost")
    return JudgeReply(
        text=text,
        model=getattr(response, "model", None) or model,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
    )
