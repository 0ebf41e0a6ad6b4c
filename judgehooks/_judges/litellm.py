"""The default judge: any litellm model string, or any OpenAI-compatible server.

The only module that imports litellm, on first use (the import takes seconds).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import anyio.to_thread

from ..exceptions import MalformedVerdict
from .base import BaseJudge, JudgeReply, _status_of
from .prompt import JudgeRequest, verdict_schema

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


def _refuses_structured_output(exc: BaseException) -> bool:
    text = str(exc).lower()
    return _status_of(exc) == 400 and ("response_format" in text or "json_schema" in text)


class LiteLLMJudge(BaseJudge):
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
