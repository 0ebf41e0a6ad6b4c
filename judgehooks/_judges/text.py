"""A model asked for free text (no verdict): what `optimize` and `align_judge` ask to reflect.

It takes what a judge's ``model=`` takes, a litellm model string (with ``api_base``) or an agno
Model, and reaches it through the judges' own transports (`LiteLLMJudge` without a response
format, the agno Model's ``aresponse``), with the judges' retry policy and error kinds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import anyio

from .._base.secrets import scrub
from .agno import AgnoJudge
from .base import BaseJudge, JudgeReply, describe, error_chain, error_kind, error_name, is_retryable, shown_url
from .call import RetryPolicy
from .litellm import LiteLLMJudge
from .prompt import JudgeRequest

#: the longest reply kept, in characters: a reply becomes an instruction or criteria someone reads
MAX_TEXT_CHARS = 20_000


class TextModel:
    """``await ask(messages) -> JudgeReply``: one question, retried as judge calls are."""

    def __init__(self, model: Any, *, api_base: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0) -> None:
        if model is None or (not isinstance(model, str) and not hasattr(model, "aresponse")):
            raise TypeError(f"reflection_model must be a litellm model string (e.g. 'openai/gpt-4o') or an agno "
                            f"Model, got {type(model).__name__}")
        self.retry = RetryPolicy()
        self.timeout = timeout
        # no reply cap: the reply is instructions or criteria (cut to MAX_TEXT_CHARS), not a verdict
        self._judge: BaseJudge = (LiteLLMJudge(model, api_base=api_base, api_key=api_key, timeout=timeout,
                                               structured_output=False, litellm_kwargs={"max_tokens": None})
                                  if isinstance(model, str) else AgnoJudge(model=model))
        self.model = self._judge.model

    @property
    def endpoint(self) -> str | None:
        """The URL the model is called at, without credentials, or None for the provider's default."""
        return shown_url(self._judge)

    def failure(self, exc: BaseException) -> str:
        """Why the model did not answer, in one line: what kind of failure, where, and the deepest
        error's own words (a refused connection says so), credentials masked."""
        chain = error_chain(exc)
        said = next((e for e in reversed(chain) if str(e).strip()), exc)
        where = self.endpoint or "the provider's default URL"
        return scrub(f"the reflection model {self.model!r} at {where} did not answer ({error_kind(exc)}): "
                     f"{error_name(said)}: {describe(said)}")

    async def ask(self, messages: Sequence[dict[str, str]]) -> JudgeReply:
        """The model's reply to `messages`; raises the last error once the retries are spent."""
        attempt = 0
        while True:
            attempt += 1
            try:
                async with asyncio.timeout(self.timeout):
                    reply = await self._once(messages)
                return replace(reply, text=reply.text[:MAX_TEXT_CHARS])
            except Exception as exc:
                if attempt > self.retry.retries or not is_retryable(exc):
                    raise
                await anyio.sleep(self.retry.delay(attempt, exc))

    async def _once(self, messages: Sequence[dict[str, str]]) -> JudgeReply:
        request = JudgeRequest(messages=tuple(messages), mode="binary", nonce="")
        if isinstance(self._judge, AgnoJudge):
            return await self._judge.complete_text(request)
        await self._judge.prepare()
        return await self._judge.complete(request)

    async def aclose(self) -> None:
        await self._judge.aclose()
