"""The async core: one context in, one stored record out. The only place that does I/O.

    EvalContext -> run_evaluator -> Outcome -> EvalRecord -> deliver: store, callbacks, log

Any evaluator (an LLM judge, a deterministic check, a composite) plugs in through
`run_evaluator`, which never raises: failures are `error` outcomes with the exception's type and
message. `Pipeline.grade` makes the record; `Pipeline.deliver` is the ONE way records leave
grading, used inline, by the batched background writer and by the Redis worker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pydantic import ValidationError

from .._base.context import EvalContext
from .._base.log import log
from .._base.metering import current_meter
from .._base.observers import observers
from .._base.outcome import Outcome, clip_reason, run_evaluator
from .._base.record import EvalRecord, Mode, new_record, record_id
from .._base.stopwatch import Stopwatch, current_stopwatch
from .._judges.base import Judge, describe, error_name
from ..exceptions import BadOutcome, RedactionError, StoreError
from ..stores import Store
from ..stores._base import BaseStore, write_salvaging
from . import tracing
from .ratelimit import Pace
from .routing import Review
from .spend import Meter, SpendCap

__all__ = ("CALLBACKS", "Callbacks", "Graded", "Pipeline", "make_record", "make_skipped")


class Graded(Protocol):
    """What the core needs from an evaluator (every `judgehooks.Evaluator` is one)."""

    @property
    def evaluator_name(self) -> str: ...

    @property
    def mode(self) -> Mode: ...

    @property
    def pass_threshold(self) -> float | None: ...

    @property
    def evaluator_version(self) -> str | None: ...

    @property
    def scale(self) -> float: ...  # the full mark of its scores (10 for an LLM judge)

    def evaluate(self, ctx: EvalContext) -> Any: ...

    def record_metadata(self) -> Mapping[str, Any]: ...


def _ids(ctx: EvalContext, ev: Graded, sample_rate: float) -> dict[str, Any]:
    own = ev.record_metadata()
    criteria = own.get("criteria")
    version = ev.evaluator_version  # read once: the id and the record name the same version
    name = ev.evaluator_name
    return {"id": record_id(name, ctx.run_id or "offline", ctx.case_index, version=version),
            "evaluator": name, "evaluator_version": version, "mode": ev.mode, "threshold": ev.pass_threshold,
            "agent_id": ctx.agent_id, "agent_name": ctx.agent_name, "team_id": ctx.team_id,
            "team_name": ctx.team_name, "run_id": ctx.run_id, "session_id": ctx.session_id, "user_id": ctx.user_id,
            "trace_id": ctx.trace_id, "span_id": ctx.span_id, "input": ctx.input, "output": ctx.output,
            "sample_rate": sample_rate, "redacted_by": ctx.redacted_by,
            "criteria": criteria if isinstance(criteria, str) else None,
            "metadata": {**ctx.metadata, **own} if ctx.metadata else dict(own), **_run_usage(ctx)}


def _run_usage(ctx: EvalContext) -> dict[str, Any]:
    """The judged run's own latency, tokens and cost (agno's metrics), for the record."""
    usage = ctx.usage
    if usage is None:
        return {}
    return {"run_latency_ms": usage.latency_ms, "run_input_tokens": usage.input_tokens,
            "run_output_tokens": usage.output_tokens, "run_cost_usd": usage.cost_usd}


def make_record(ctx: EvalContext, ev: Graded, outcome: Outcome, *, latency_ms: float,
                sample_rate: float = 1.0, review: Review | None = None) -> EvalRecord:
    """Pure: the record for one finished evaluation, passed/failed from a verdict, else error;
    with a `review` (live grading), routed to people when the verdict is in doubt."""
    status = outcome.status
    error = outcome.error
    graded = status != "error"
    fields = _ids(ctx, ev, sample_rate)
    used = outcome.used
    if used:  # what the evaluator judged under, not what its settings say by now
        for key in ("mode", "threshold", "criteria"):
            if key in used:
                fields[key] = used[key]
        if "criteria" in used:
            fields["metadata"]["criteria"] = used["criteria"]
    reason = clip_reason(outcome.reason) if graded else None
    if reason is not outcome.reason and reason is not None:
        fields["metadata"]["reason_clipped_from"] = len(outcome.reason or "")  # the full length, in characters
    fields["status"] = status
    fields["score"] = outcome.score if graded else None
    fields["passed"] = outcome.passed if graded else None
    fields["reason"] = reason
    fields["details"] = dict(outcome.details)
    fields["judge_model"] = outcome.judge_model
    fields["latency_ms"] = round(latency_ms, 3)
    fields["prompt_tokens"] = outcome.prompt_tokens
    fields["completion_tokens"] = outcome.completion_tokens
    fields["cost_usd"] = outcome.cost_usd
    fields["attempts"] = outcome.attempts
    fields["error_type"] = None if error is None else error_name(error)
    fields["error_message"] = None if error is None else describe(error)
    if review is not None and graded:
        fields["review_reason"] = review.reason(fields["id"], outcome.passed, outcome.score, fields["threshold"],
                                                outcome.details)
    return new_record(fields)


def make_skipped(ctx: EvalContext, ev: Graded, reason: str, sample_rate: float = 1.0,
                 details: Mapping[str, Any] | None = None) -> EvalRecord:
    """Pure: the record of an evaluation that was not graded (shed under load, over budget), with the reason."""
    return new_record({**_ids(ctx, ev, sample_rate), "status": "skipped", "reason": reason,
                       "details": dict(details or {})})


def withheld(ctx: EvalContext) -> Outcome:
    """The outcome of a run whose redactor raised: an error, and no evaluator saw the (withheld) text."""
    return Outcome(error=RedactionError(
        f"the redactor {ctx.redacted_by} raised {ctx.redaction_error}; the run's text was withheld from the judge "
        f"and the store (the exception's message is not kept either: it may quote the text)"))


AsyncCallback = Callable[[EvalRecord], Awaitable[None]]

#: the callback settings, in the order `Pipeline.notify` reads them
CALLBACKS = ("on_fail", "on_error", "on_drop", "on_record")


@dataclass(slots=True)
class Callbacks:
    """The user's callbacks, wrapped once (`wrap_callback`). ONE holder shared by every copy of an
    evaluator's pipeline (inline, offline, its dispatcher's, its session grader's, a worker's), so a
    callback assigned after construction reaches every path, and none keeps the old one."""

    on_fail: AsyncCallback | None = None
    on_error: AsyncCallback | None = None
    on_drop: AsyncCallback | None = None  # a `skipped` record: over a spend cap, shed from a full queue, a lost turn
    on_record: AsyncCallback | None = None  # every record, any status (windowed alerts)


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Everything an evaluation needs at run time. Immutable (but for the callbacks' one holder):
    concurrent calls share it safely."""

    evaluator: Graded
    store: Store
    callbacks: Callbacks = field(default_factory=Callbacks)
    spend: SpendCap | None = None  # max_cost_usd / max_calls: over them, a `skipped` record with reason "budget"
    pace: Pace | None = None  # requests_per_minute: every judge call waits its turn (per judge model)
    review: Review | None = None  # live grading only: verdicts in doubt go to people (`routing`)

    @property
    def name(self) -> str:
        return self.evaluator.evaluator_name

    @property
    def judge(self) -> Any:
        """The evaluator's judge when it calls one (rate limits and warm-up key on it), else None."""
        judge = getattr(self.evaluator, "judge", None)
        return judge if isinstance(judge, Judge) else None  # a Borderline's `judge` is an evaluator

    def record_id(self, ctx: EvalContext) -> str:
        """The id the record of `ctx` gets if the evaluator's version stays as it is now."""
        return record_id(self.name, ctx.run_id or "offline", ctx.case_index, version=self.evaluator.evaluator_version)

    async def stored(self, ids: Collection[str], *, scan: bool = True) -> set[str]:
        """The duplicate check, the admission path's one (`dispatch`): which of these record ids the
        store holds already. A job or session window whose record is stored (a process died between
        storing it and forgetting the job, a Redis redelivery, a replay) is then dropped unjudged,
        unpaid and not called back again, on every path that can see a job twice: the background
        queue's and `resume`'s claims from the outbox, the Redis workers, the session clocks.

        `scan=False` (a lookup per job, as Redis workers make) asks only stores that look ids up
        (SQLite, PostgreSQL, memory, agno dbs), not one that would read through every record for it
        (JSONL): its duplicates are graded again, and stored once. When the store cannot answer
        (down, or no lookup), nothing counts as stored: the job is graded, and the store's write
        still keeps one record per id."""
        store = self.store
        if not ids or not isinstance(store, BaseStore):
            return set()
        if not scan and type(store).records_by_id is BaseStore.records_by_id:
            return set()
        try:
            return {r.id for r in await store.records_by_id(list(ids))}
        except Exception as exc:
            log.debug("record_lookup_failed", evaluator=self.name, error_type=type(exc).__name__)
            return set()

    def skipped(self, ctx: EvalContext, reason: str, sample_rate: float = 1.0) -> EvalRecord:
        return make_skipped(ctx, self.evaluator, reason, sample_rate)

    def unreadable(self, job_id: str, why: str) -> EvalRecord:
        """The `error` record of a job that cannot be read back (`why`), under its job's id."""
        record = make_record(EvalContext(input="", output=""), self.evaluator, Outcome(error=ValueError(why)),
                             latency_ms=0.0)
        return replace(record, id=job_id)

    async def grade(self, ctx: EvalContext, sample_rate: float = 1.0) -> EvalRecord:
        """Run the evaluator; return the unsaved record. Never raises.

        The grading steps of the admission path, the same on every path (inline, background, offline,
        sessions, resume, Redis workers): a run whose redactor failed is an `error` unjudged; the
        spend caps admit the run (else a `skipped` record, reason "budget"); then every judge call
        of the grading, retries and composite members included, is admitted on its own by the
        grading's `Meter`: against the caps, then `requests_per_minute`."""
        stopwatch = Stopwatch()  # a judge's one-time setup (an import) pauses it: not judge latency
        token = current_stopwatch.set(stopwatch)
        try:
            return await self._grade(ctx, sample_rate, stopwatch)
        finally:
            current_stopwatch.reset(token)

    async def _grade(self, ctx: EvalContext, sample_rate: float, stopwatch: Stopwatch) -> EvalRecord:
        if ctx.redaction_error is not None:
            outcome = withheld(ctx)
        elif self.spend is None and self.pace is None:
            outcome = await run_evaluator(self.evaluator, ctx)
        else:
            ticket = None
            if self.spend is not None:
                ticket = await self.spend.admit()
                if not ticket.admitted:
                    return make_skipped(ctx, self.evaluator, "budget", sample_rate, self.spend.details(ticket))
            meter = Meter(self.spend, ticket, pace=self.pace)
            token = current_meter.set(meter)
            try:
                outcome = await run_evaluator(self.evaluator, ctx)
            finally:
                current_meter.reset(token)
            await meter.settle(outcome.cost_usd)
        try:
            return make_record(ctx, self.evaluator, outcome, latency_ms=stopwatch.elapsed_ms(),
                               sample_rate=sample_rate, review=self.review)
        except ValidationError as exc:  # e.g. a custom judge's token count as text: still one record, an error
            fields = ", ".join(".".join(map(str, e["loc"])) + f" ({e['msg']})" for e in exc.errors())
            bad = BadOutcome(f"the evaluator's outcome has what no record holds: {fields}")
            return make_record(ctx, self.evaluator, Outcome(error=bad, attempts=outcome.attempts),
                               latency_ms=stopwatch.elapsed_ms(), sample_rate=sample_rate)

    async def evaluate(self, ctx: EvalContext, sample_rate: float = 1.0) -> EvalRecord:
        """Grade, then deliver. Raises StoreError (after callbacks) if the store is down."""
        record = await self.grade(ctx, sample_rate)
        error = await self.deliver([record])
        if error is not None:
            raise error
        return record

    async def store_batch(self, records: Sequence[EvalRecord]) -> tuple[set[str], StoreError | None]:
        """The first half of `deliver`: store the records (with retries; one bad record never sinks
        the others: see `write_salvaging`) and tell the observers and tracing about each, stored or
        not. Returns the ids stored and the StoreError for the rest (never raised)."""
        stored, error = await write_salvaging(self.store, records) if records else ([], None)
        observers.notify(records)  # judgehooks.testing.capture_records(): stored or not, before callbacks
        tracing.emit(records)  # the gen_ai.evaluation.result events, when the application traces
        return {r.id for r in stored}, error

    async def deliver(self, records: Sequence[EvalRecord]) -> StoreError | None:
        """Store the records (`store_batch`), then for each: its callbacks and the `evaluation` log
        event, saying whether it was stored. Returns the StoreError for the records not stored (after
        the callbacks ran), never raises it: the caller decides whether those stay in an outbox or
        the error goes up. (A background dispatcher runs the same two halves, with the job log's
        `done` between them and each record's callbacks as a task of their own.)"""
        done, error = await self.store_batch(records)
        for record in records:
            await self.notify(record, stored=record.id in done)
        return error

    def calls_back(self, record: EvalRecord) -> bool:
        """Whether `notify` has a user callback to call for `record` (else it only logs)."""
        return self.callbacks.on_record is not None or self._by_status(record) is not None

    def _by_status(self, record: EvalRecord) -> Any:
        """The callback for `record`'s status: on_fail, on_error or on_drop (None if unset)."""
        status = record.status
        if status == "failed":
            return self.callbacks.on_fail
        if status == "error":
            return self.callbacks.on_error
        return self.callbacks.on_drop if status == "skipped" else None

    async def notify(self, record: EvalRecord, *, stored: bool) -> None:
        """Callbacks, then the one structured event for this evaluation: the ONE place any callback
        is called (a shed job's `on_drop` too)."""
        callbacks = self.callbacks
        callback = self._by_status(record)
        if callback is not None:
            await callback(record)
        if callbacks.on_record is not None:
            await callbacks.on_record(record)
        log.info("evaluation", evaluator=record.evaluator, status=record.status, score=record.score,
                 agent_id=record.agent_id, team_id=record.team_id, run_id=record.run_id,
                 session_id=record.session_id, user_id=record.user_id, latency_ms=record.latency_ms,
                 attempts=record.attempts, error_type=record.error_type, record_id=record.id, stored=stored)
