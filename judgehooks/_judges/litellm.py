"""The default judge: any litellm model string, or any OpenAI-compatible server.

The only module that imports litellm, on first use (the import takes seconds).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import anyio.to_thread

from .._base.record import Mode
from ..exceptions import JudgeUnavailable, MalformedVerdict
from .base import BaseJudge, JudgeReply, _status_of, is_auth_error
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
        try:
            response = await self._ask(litellm, list(request.messages), request.mode)
        except Exception as exc:
            if is_auth_error(exc):  # one line naming the key to set, and no retries
                raise JudgeUnavailable(self._auth_message(exc)) from exc
            raise
        return _reply_from_litellm(response, self.model)

    async def _ask(self, litellm: Any, messages: list[dict[str, str]], mode: Mode) -> Any:
        if self.structured_output:
            try:
                return await litellm.acompletion(model=self.model, messages=messages,
                                                 response_format=verdict_schema(mode), **self._kwargs)
            except Exception as exc:
                if not _refuses_structured_output(exc):
                    raise
        return await litellm.acompletion(model=self.model, messages=messages, **self._kwargs)

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
