"""The LLM-judge call: prompt, judge (with retries and a timeout), verdict, as an `Outcome`.

Judge failures are values: after the retry policy gives up, the outcome carries the exception,
which the core stores as an `error` record. `AgentAsJudgeEval` and `Rubric` both grade through it.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from .._base.context import EvalContext
from .._base.log import log
from .._base.metering import current_meter
from .._base.outcome import Outcome
from .._base.record import Mode
from ..exceptions import JudgeUnavailable, MissingContext
from .agreement import check_agreement
from .base import BaseJudge, Judge, JudgeReply, error_name, is_retryable, retry_after_seconds
from .prompt import JudgeRequest, build_request
from .verdict import Verdict, parse_verdict


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How judge calls are retried: `retries` extra attempts, exponential backoff with jitter,
    capped at `max_backoff`; a server's Retry-After is honoured up to that cap."""

    retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0

    def delay(self, attempt: int, exc: BaseException) -> float:
        hinted = retry_after_seconds(exc)
        if hinted is not None:
            return min(hinted, self.max_backoff)
        return min(self.backoff * (2.0 ** (attempt - 1)), self.max_backoff) * (0.5 + random.random() / 2)


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """One LLM-judge question, frozen at construction: criteria, verdict shape, judge, retries."""

    judge: Judge
    criteria: str
    mode: Mode
    threshold: float | None
    guidelines: tuple[str, ...] = ()
    include_tools: bool = False
    context_key: str | None = None  # run metadata key holding the context an answer must be faithful to
    timeout: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    label: str = ""  # who is asking, for the retry log line

    def request(self, ctx: EvalContext) -> JudgeRequest:
        context = None if self.context_key is None else ctx.metadata.get(self.context_key)
        if self.context_key is not None and context is None:
            raise MissingContext(f"run metadata has no {self.context_key!r}: this evaluator grades against the "
                                 f"context given there, e.g. agent.run(..., metadata={{{self.context_key!r}: docs}})")
        return build_request(ctx, criteria=self.criteria, mode=self.mode, guidelines=self.guidelines,
                             include_tools=self.include_tools, context=context)

    def decide(self, verdict: Verdict) -> bool:
        if self.mode == "numeric":
            assert verdict.score is not None and self.threshold is not None
            return verdict.score >= self.threshold
        assert verdict.passed is not None
        return verdict.passed

    async def ask(self, ctx: EvalContext) -> Outcome:
        """Ask the judge, with retries. Never raises: what fails ends as an error outcome.

        Under a spend cap every attempt is admitted first (`current_meter`): a refused retry ends the
        asking with the last attempt's error, a refused first attempt with a `JudgeUnavailable`."""
        attempts = 0
        prompt_tokens: int | None = None
        completion_tokens: int | None = None
        cost: float | None = None
        reply: JudgeReply | None = None
        verdict: Verdict | None = None
        error: BaseException | None = None
        if isinstance(self.judge, BaseJudge):  # e.g. import litellm (seconds) off the loop, outside the timeout
            try:
                await self.judge.prepare()
            except Exception as exc:
                return Outcome(error=exc, attempts=0, judge_model=self.judge.model)
        meter = current_meter.get()
        refused: str | None = None
        while True:
            if meter is not None and not await meter.admit_call():
                refused = meter.refusal()
                if error is None:
                    error = JudgeUnavailable(f"not asked: {refused}")
                else:
                    log.info("judge_retry_refused", evaluator=self.label, run_id=ctx.run_id, attempt=attempts,
                             error_type=error_name(error), note=refused)
                verdict = None
                break
            attempts += 1
            try:
                request = self.request(ctx)  # a fresh nonce per attempt
                async with asyncio.timeout(self.timeout):
                    reply = await self.judge.complete(request)
                prompt_tokens = _add(prompt_tokens, reply.prompt_tokens)
                completion_tokens = _add(completion_tokens, reply.completion_tokens)
                cost = _add(cost, reply.cost_usd)
                if meter is not None:
                    await meter.add_cost(reply.cost_usd)
                verdict, error = parse_verdict(reply.text, self.mode, nonce=request.nonce), None
                if self.mode == "binary":  # the judge's own pass/fail; in numeric mode the threshold decides
                    check_agreement(self.decide(verdict), verdict.reason)  # a pass saying "fails" is no pass
                break
            except Exception as exc:
                verdict, error = None, exc
                if attempts > self.retry.retries or not is_retryable(exc):
                    break
                delay = self.retry.delay(attempts, exc)
                log.info("judge_retry", evaluator=self.label, run_id=ctx.run_id, attempt=attempts,
                         error_type=error_name(exc), delay_s=round(delay, 3))
                await anyio.sleep(delay)
        usage: dict[str, Any] = {
            "used": {"criteria": self.criteria, "mode": self.mode, "threshold": self.threshold},
            "attempts": attempts, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "cost_usd": cost, "judge_model": reply.model if reply is not None and reply.model else self.judge.model}
        if verdict is None:  # a refused call says so: the record's details["spend_cap"]
            return Outcome(error=error, details={"spend_cap": refused} if refused else {}, **usage)
        return Outcome(passed=self.decide(verdict), score=verdict.score, reason=verdict.reason, **usage)


_N = TypeVar("_N", int, float)


def _add(total: _N | None, value: _N | None) -> _N | None:
    if value is None:
        return total
    return value if total is None else total + value
