"""The async core: one context in, one stored record out. The only place that does I/O.

    build request -> judge (retried) -> verdict -> EvalRecord -> store -> callbacks -> log

Judge failures are values: after the retry policy gives up, the record is `error` with the
exception's type and message. Every path (hooks, offline batches, sync and async) runs this code.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ._context import EvalContext
from ._errors import MissingContext, StoreError
from ._judge import Judge, JudgeReply, describe, error_name, is_retryable, retry_after_seconds
from ._log import log
from ._prompt import JudgeRequest, build_request
from ._record import EvalRecord, Mode, record_id
from ._verdict import Verdict, parse_verdict
from .stores import Store, write_with_retry


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
        return min(self.backoff * (2 ** (attempt - 1)), self.max_backoff) * (0.5 + random.random() / 2)


@dataclass(frozen=True, slots=True)
class Grading:
    """Settings of one LLM-judge evaluator, frozen at construction."""

    evaluator: str
    criteria: str
    mode: Mode
    threshold: int | None
    guidelines: tuple[str, ...] = ()
    include_tools: bool = False
    context_key: str | None = None  # run metadata key holding the context an answer must be faithful to
    timeout: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def request(self, ctx: EvalContext) -> JudgeRequest:
        context = None if self.context_key is None else ctx.metadata.get(self.context_key)
        if self.context_key is not None and context is None:
            raise MissingContext(f"run metadata has no {self.context_key!r}: this evaluator grades against the "
                                 f"context given there, e.g. agent.run(..., metadata={{{self.context_key!r}: docs}})")
        return build_request(ctx, criteria=self.criteria, mode=self.mode, guidelines=self.guidelines,
                             include_tools=self.include_tools, context=context)

    def record_id(self, ctx: EvalContext) -> str:
        return record_id(self.evaluator, ctx.run_id or "offline", ctx.case_index)

    def decide(self, verdict: Verdict) -> bool:
        if self.mode == "numeric":
            assert verdict.score is not None and self.threshold is not None
            return verdict.score >= self.threshold
        assert verdict.passed is not None
        return verdict.passed


def make_record(ctx: EvalContext, grading: Grading, *, judge_model: str | None, verdict: Verdict | None,
                reply: JudgeReply | None, error: BaseException | None, attempts: int, latency_ms: float,
                prompt_tokens: int | None, completion_tokens: int | None, cost_usd: float | None,
                sample_rate: float = 1.0) -> EvalRecord:
    """Pure: the record for one finished evaluation, passed/failed from a verdict, else error."""
    if verdict is not None:
        passed = grading.decide(verdict)
        status = "passed" if passed else "failed"
    else:
        passed, status = None, "error"
    return EvalRecord(
        id=grading.record_id(ctx),
        status=status,
        evaluator=grading.evaluator,
        mode=grading.mode,
        threshold=grading.threshold,
        score=None if verdict is None else verdict.score,
        passed=passed,
        reason=None if verdict is None else verdict.reason,
        agent_id=ctx.agent_id, agent_name=ctx.agent_name, team_id=ctx.team_id, team_name=ctx.team_name,
        run_id=ctx.run_id, session_id=ctx.session_id, user_id=ctx.user_id,
        input=ctx.input, output=ctx.output,
        judge_model=(reply.model if reply is not None and reply.model else judge_model),
        latency_ms=round(latency_ms, 3),
        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost_usd,
        attempts=attempts,
        sample_rate=sample_rate,
        error_type=None if error is None else error_name(error),
        error_message=None if error is None else describe(error),
        metadata={**ctx.metadata, "criteria": grading.criteria},
    )


def make_skipped(ctx: EvalContext, grading: Grading, reason: str, sample_rate: float = 1.0) -> EvalRecord:
    """Pure: the record of an evaluation that was not graded (shed under load), with the reason."""
    return EvalRecord(
        id=grading.record_id(ctx), status="skipped", evaluator=grading.evaluator, mode=grading.mode,
        threshold=grading.threshold, reason=reason, agent_id=ctx.agent_id, agent_name=ctx.agent_name,
        team_id=ctx.team_id, team_name=ctx.team_name, run_id=ctx.run_id, session_id=ctx.session_id,
        user_id=ctx.user_id, input=ctx.input, output=ctx.output, sample_rate=sample_rate,
        metadata={**ctx.metadata, "criteria": grading.criteria},
    )


AsyncCallback = Callable[[EvalRecord], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Everything an evaluation needs at run time. Immutable: concurrent calls share it safely."""

    grading: Grading
    judge: Judge
    store: Store
    on_fail: AsyncCallback | None = None
    on_error: AsyncCallback | None = None
    on_record: AsyncCallback | None = None  # every record, any status (windowed alerts)

    async def judge_once(self, ctx: EvalContext, sample_rate: float = 1.0) -> EvalRecord:
        """Ask the judge, with retries; return the unsaved record. Never raises: whatever fails
        between the context and the verdict ends as an `error` record."""
        g = self.grading
        started = time.perf_counter()
        attempts = 0
        prompt_tokens = completion_tokens = None
        cost: float | None = None
        reply: JudgeReply | None = None
        while True:
            attempts += 1
            try:
                request = g.request(ctx)  # a fresh nonce per attempt
                with anyio.fail_after(g.timeout):
                    reply = await self.judge.complete(request)
                prompt_tokens = _add(prompt_tokens, reply.prompt_tokens)
                completion_tokens = _add(completion_tokens, reply.completion_tokens)
                cost = _add(cost, reply.cost_usd)
                verdict = parse_verdict(reply.text, g.mode)
                error: BaseException | None = None
                break
            except Exception as exc:
                verdict, error = None, exc
                if attempts > g.retry.retries or not is_retryable(exc):
                    break
                delay = g.retry.delay(attempts, exc)
                log.info("judge_retry", evaluator=g.evaluator, run_id=ctx.run_id, attempt=attempts,
                         error_type=error_name(exc), delay_s=round(delay, 3))
                await anyio.sleep(delay)
        return make_record(ctx, g, judge_model=self.judge.model, verdict=verdict, reply=reply, error=error,
                           attempts=attempts, latency_ms=(time.perf_counter() - started) * 1000,
                           prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost,
                           sample_rate=sample_rate)

    async def evaluate(self, ctx: EvalContext, sample_rate: float = 1.0) -> EvalRecord:
        """Grade, store, call back, log. Raises StoreError (after callbacks) if the store is down."""
        record = await self.judge_once(ctx, sample_rate)
        return await self.finish(record)

    async def finish(self, record: EvalRecord) -> EvalRecord:
        store_error: StoreError | None = None
        try:
            await write_with_retry(self.store, [record])
        except StoreError as exc:
            exc.records = [record]
            store_error = exc
        await self.notify(record, stored=store_error is None)
        if store_error is not None:
            raise store_error
        return record

    async def notify(self, record: EvalRecord, *, stored: bool) -> None:
        """Callbacks, then the one structured event for this evaluation."""
        if record.status == "failed" and self.on_fail is not None:
            await self.on_fail(record)
        elif record.status == "error" and self.on_error is not None:
            await self.on_error(record)
        if self.on_record is not None:
            await self.on_record(record)
        log.info("evaluation", evaluator=record.evaluator, status=record.status, score=record.score,
                 agent_id=record.agent_id, team_id=record.team_id, run_id=record.run_id,
                 session_id=record.session_id, user_id=record.user_id, latency_ms=record.latency_ms,
                 attempts=record.attempts, error_type=record.error_type, record_id=record.id, stored=stored)

    async def evaluate_many(self, contexts: Sequence[EvalContext], limit: int) -> list[EvalRecord | BaseException]:
        """Grade many contexts, at most `limit` at once; results in input order (StoreErrors as values)."""
        results: list[Any] = [None] * len(contexts)
        semaphore = anyio.Semaphore(limit)

        async def one(i: int, ctx: EvalContext) -> None:
            async with semaphore:
                try:
                    results[i] = await self.evaluate(ctx)
                except StoreError as exc:
                    results[i] = exc

        async with anyio.create_task_group() as tg:
            for i, ctx in enumerate(contexts):
                tg.start_soon(one, i, ctx)
        return results


def _add(total: Any, value: Any) -> Any:
    if value is None:
        return total
    return value if total is None else total + value
