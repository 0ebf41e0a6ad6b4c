"""The async core: one context in, one stored record out. The only place that does I/O.

    evaluator.assess(ctx) -> Outcome -> EvalRecord -> store -> callbacks -> log

Any evaluator (an LLM judge, a deterministic check, a composite) plugs in through `assess`, which
never raises: failures are `error` outcomes with the exception's type and message. Every path
(hooks, background dispatch, offline batches, sync and async) runs this code.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from .._base.context import EvalContext
from .._base.log import log
from .._base.outcome import Outcome
from .._base.record import EvalRecord, Mode, record_id
from .._judges.base import describe, error_name
from .._judges.call import RetryPolicy
from ..exceptions import StoreError
from ..stores import Store, write_with_retry

__all__ = ("Graded", "Pipeline", "RetryPolicy", "make_record", "make_skipped")


class Graded(Protocol):
    """What the core needs from an evaluator (every `judgehooks.Evaluator` is one)."""

    evaluator: str
    mode: Mode
    pass_threshold: float | None

    async def assess(self, ctx: EvalContext) -> Outcome: ...

    def record_metadata(self) -> Mapping[str, Any]: ...


def _ids(ctx: EvalContext, ev: Graded, sample_rate: float) -> dict[str, Any]:
    return dict(id=record_id(ev.evaluator, ctx.run_id or "offline", ctx.case_index), evaluator=ev.evaluator,
                mode=ev.mode, threshold=ev.pass_threshold, agent_id=ctx.agent_id, agent_name=ctx.agent_name,
                team_id=ctx.team_id, team_name=ctx.team_name, run_id=ctx.run_id, session_id=ctx.session_id,
                user_id=ctx.user_id, input=ctx.input, output=ctx.output, sample_rate=sample_rate,
                metadata={**ctx.metadata, **ev.record_metadata()})


def make_record(ctx: EvalContext, ev: Graded, outcome: Outcome, *, latency_ms: float,
                sample_rate: float = 1.0) -> EvalRecord:
    """Pure: the record for one finished evaluation, passed/failed from a verdict, else error."""
    status = outcome.status
    error = outcome.error
    graded = status != "error"
    return EvalRecord(
        **_ids(ctx, ev, sample_rate), status=status,
        score=outcome.score if graded else None, passed=outcome.passed if graded else None,
        reason=outcome.reason if graded else None, details=dict(outcome.details),
        judge_model=outcome.judge_model, latency_ms=round(latency_ms, 3), prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens, cost_usd=outcome.cost_usd, attempts=outcome.attempts,
        error_type=None if error is None else error_name(error),
        error_message=None if error is None else describe(error),
    )


def make_skipped(ctx: EvalContext, ev: Graded, reason: str, sample_rate: float = 1.0) -> EvalRecord:
    """Pure: the record of an evaluation that was not graded (shed under load), with the reason."""
    return EvalRecord(**_ids(ctx, ev, sample_rate), status="skipped", reason=reason)


AsyncCallback = Callable[[EvalRecord], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Everything an evaluation needs at run time. Immutable: concurrent calls share it safely."""

    evaluator: Graded
    store: Store
    on_fail: AsyncCallback | None = None
    on_error: AsyncCallback | None = None
    on_record: AsyncCallback | None = None  # every record, any status (windowed alerts)

    @property
    def name(self) -> str:
        return self.evaluator.evaluator

    @property
    def judge(self) -> Any:
        """The evaluator's judge when it calls one (rate limits and warm-up key on it), else None."""
        return getattr(self.evaluator, "judge", None)

    def record_id(self, ctx: EvalContext) -> str:
        return record_id(self.name, ctx.run_id or "offline", ctx.case_index)

    def skipped(self, ctx: EvalContext, reason: str, sample_rate: float = 1.0) -> EvalRecord:
        return make_skipped(ctx, self.evaluator, reason, sample_rate)

    async def grade(self, ctx: EvalContext, sample_rate: float = 1.0) -> EvalRecord:
        """Run the evaluator; return the unsaved record. Never raises."""
        started = time.perf_counter()
        outcome = await self.evaluator.assess(ctx)
        return make_record(ctx, self.evaluator, outcome, latency_ms=(time.perf_counter() - started) * 1000,
                           sample_rate=sample_rate)

    async def evaluate(self, ctx: EvalContext, sample_rate: float = 1.0) -> EvalRecord:
        """Grade, store, call back, log. Raises StoreError (after callbacks) if the store is down."""
        record = await self.grade(ctx, sample_rate)
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
