"""Judges: the seam between an evaluator and the model that grades.

A Judge is anything with ``async complete(request) -> JudgeReply``. `LiteLLMJudge` (any litellm
model string, the default) and `AgnoJudge` (an agno Model or evaluator Agent) ship here; `FakeJudge`
in `judgehooks.testing`. Judges make ONE attempt: the retry policy lives in the core, so there are
no hidden SDK retries on top of ours.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import anyio.to_thread

from ._errors import MalformedVerdict
from ._prompt import JudgeRequest, verdict_schema


@dataclass(frozen=True, slots=True)
class JudgeReply:
    text: str
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None


@runtime_checkable
class Judge(Protocol):
    """One call to a grading model. Raise on failure; the core decides whether to retry."""

    model: str

    async def complete(self, request: JudgeRequest) -> JudgeReply: ...


_litellm_module: Any = None


def load_litellm() -> Any:
    """Import litellm on first use (it takes seconds) with its remote price-list fetch turned off."""
    global _litellm_module
    if _litellm_module is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        # litellm prints a "Give Feedback" banner on every error; a hook must never print.
        litellm.suppress_debug_info = True
        _litellm_module = litellm
    return _litellm_module


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


_RETRYABLE_NAMES = frozenset({
    "JudgeProcessDied", "Timeout", "APITimeoutError", "APIConnectionError", "RateLimitError", "InternalServerError",
    "ServiceUnavailableError", "BadGatewayError", "ConnectError", "ReadTimeout", "RemoteProtocolError"})


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts, connection errors and unreadable replies are worth another attempt."""
    if isinstance(exc, MalformedVerdict):
        return True
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    name = error_name(exc)
    if name in _RETRYABLE_NAMES:
        return True
    status = _status_of(exc)
    return status is not None and (status == 429 or status >= 500)


def retry_after_seconds(exc: BaseException) -> float | None:
    """The server's Retry-After, when the error carries one (seconds form only)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _refuses_structured_output(exc: BaseException) -> bool:
    text = str(exc).lower()
    return _status_of(exc) == 400 and ("response_format" in text or "json_schema" in text)


class LiteLLMJudge:
    """Grades through ``litellm.acompletion``: any provider, or any OpenAI-compatible server.

    Connection settings are passed per call; litellm's provider variables (``OPENAI_API_KEY``,
    ``OPENAI_API_BASE``...) apply when these are None. `structured_output=True` asks for a JSON
    schema response format and falls back to plain text when the server refuses it.
    """

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, temperature: float | None = None, structured_output: bool = True,
                 litellm_kwargs: Mapping[str, Any] | None = None) -> None:
        self.model = model
        self.structured_output = structured_output
        kwargs: dict[str, Any] = {"timeout": timeout, "max_retries": 0, "num_retries": 0}
        if api_base is not None:
            kwargs["api_base"] = api_base
        if api_key is not None:
            kwargs["api_key"] = api_key
        if temperature is not None:
            kwargs["temperature"] = temperature
        kwargs.update(litellm_kwargs or {})
        self._kwargs = kwargs

    @property
    def call_kwargs(self) -> dict[str, Any]:
        """Everything passed to `litellm.acompletion` besides model and messages."""
        return dict(self._kwargs)

    def warm_up(self) -> None:
        """Import litellm now (seconds), e.g. on a side thread before the first grading."""
        load_litellm()

    async def prepare(self) -> None:
        """Import litellm on a worker thread the first time: an import of seconds must neither block
        the event loop nor count against the first judge call's timeout."""
        if _litellm_module is None:
            await anyio.to_thread.run_sync(load_litellm)

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        litellm = load_litellm()
        messages = list(request.messages)
        try:
            if not self.structured_output:
                raise _PlainText
            response = await litellm.acompletion(model=self.model, messages=messages,
                                                 response_format=verdict_schema(request.mode), **self._kwargs)
        except _PlainText:
            response = await litellm.acompletion(model=self.model, messages=messages, **self._kwargs)
        except Exception as exc:
            if not _refuses_structured_output(exc):
                raise
            response = await litellm.acompletion(model=self.model, messages=messages, **self._kwargs)
        return _reply_from_litellm(response, self.model)


class _PlainText(Exception):
    """Internal signal: skip the structured attempt."""


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


class AgnoJudge:
    """Grades with an agno Model, or with a caller's evaluator Agent (agno's own API)."""

    def __init__(self, model: Any = None, evaluator_agent: Any = None) -> None:
        if model is None and evaluator_agent is None:
            raise ValueError("AgnoJudge needs an agno `model` or an `evaluator_agent`")
        self._model = model
        self._agent = evaluator_agent
        source = model if model is not None else getattr(evaluator_agent, "model", None)
        self.model = f"{getattr(source, 'provider', None) or 'agno'}/{getattr(source, 'id', 'model')}"

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        if self._agent is not None:
            # The caller's agent keeps its own instructions; ours travel in the message.
            prompt = "\n\n".join(m["content"] for m in request.messages)
            output = await self._agent.arun(prompt, stream=False)
            content = output.content
            metrics = output.metrics
        else:
            from agno.models.message import Message

            messages = [Message(role=m["role"], content=m["content"]) for m in request.messages]
            response = await self._model.aresponse(messages=messages)
            content = response.content
            metrics = getattr(response, "response_usage", None)
        if content is not None and not isinstance(content, str):
            from ._context import render_content

            content = render_content(content)
        return JudgeReply(
            text=content or "",
            model=self.model,
            prompt_tokens=getattr(metrics, "input_tokens", None),
            completion_tokens=getattr(metrics, "output_tokens", None),
            cost_usd=getattr(metrics, "cost", None),
        )


def error_name(exc: BaseException) -> str:
    """A stable error_type: the exception's class name (litellm's names are informative), or the
    original's name for an error raised in the judge process."""
    return getattr(exc, "remote_type", None) or type(exc).__name__


def describe(exc: BaseException) -> str:
    text = str(exc) or repr(exc)
    return text if len(text) <= 500 else text[:497] + "..."

