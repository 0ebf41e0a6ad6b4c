"""The worker side: taskiq's Receiver, run in this process, grading jobs from the Redis stream.

One job: look up (or rebuild) the evaluator, grade through the same Pipeline as every other path
(its RetryPolicy retries in-process, so taskiq's retry delays, which need a scheduler, are never
used), store on the deterministic record id, then ack. A job is acked only once its record is
stored; a worker that dies before that leaves it pending, and a live worker reclaims it. Delivery is
at least once, the store exactly once, and the judge paid once: a job whose record is stored already,
or that another stream entry is grading (a redelivery, a signed entry replayed), is acked without
calling the judge (counted as `duplicate`). A job that no worker finishes in `max_deliveries`
deliveries (it kills them) goes to the dead-letter stream, and its run gets one `error` record.

What a job may choose: by default only which of the worker's own (imported) evaluators grades which
run; a worker that opts in to rebuilding (`rebuild=`) lets it choose an evaluator's grading settings,
never where the judge is (see `judgehooks._evaluators.spec.JobRebuild`). With a job key the broker
refuses unsigned or mis-signed entries before they reach `grade`; a job whose payload is unreadable
is refused the same way (kept in the refused stream, counted, logged).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from redis.asyncio import Redis
from taskiq import Context, TaskiqDepends
from taskiq.acks import AcknowledgeType
from taskiq.receiver import Receiver

from ..._base.context import EvalContext, context_from_dict
from ..._base.log import log
from ..._base.outcome import Outcome
from ..._base.record import Mode
from ..._judges.base import load_litellm
from ...exceptions import EvaluatorError, EvaluatorUnavailable, NotRebuildable
from ...stores import Store
from ..outbox import Job, job_context
from ..pipeline import Pipeline
from ..ratelimit import Pace
from ..step import settle
from . import text
from .broker import DEAD_STREAM, MAX_DELIVERIES, REFUSED_STREAM, TASK_NAME, JudgeStreamBroker, StreamMessage
from .ratelimit import KEY_PREFIX, SharedRateLimiter
from .sessionworker import SessionClock
from .signing import job_key
from .spend import RedisLedger

#: how a job's spec becomes an evaluator (with keyword settings); raises NotRebuildable when it cannot
Rebuild = Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class _Unavailable:
    """Stands in for an evaluator the worker cannot build, so its job still ends as one `error`
    record through the same Pipeline, saying why."""

    evaluator_name: str
    why: str
    mode: Mode = "binary"
    pass_threshold: float | None = None
    evaluator_version: str | None = None  # unknown: the evaluator was never built
    scale: float = 1.0
    dead_letter: bool = False  # the job itself killed its workers: not the evaluator's absence

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        return Outcome(error=EvaluatorError(self.why) if self.dead_letter else EvaluatorUnavailable(self.why))

    def record_metadata(self) -> Mapping[str, Any]:
        return {}


#: the stream entry the running task is grading (set by the receiver for each delivery)
_entry: ContextVar[str | None] = ContextVar("judgehooks_stream_entry", default=None)
#: a record id being graded, by the entry that grades it: replays of one job are paid once
CLAIM_PREFIX = "judgehooks:grading:"
#: how long a claim outlives a worker that died holding it: its own entry is reclaimed under the same
#: claim (the same entry id), a replay meanwhile is acked as a duplicate
CLAIM_TTL_S = 3600


class _Receiver(Receiver):
    """taskiq's Receiver, remembering its running jobs (to cancel them at the shutdown deadline) and
    releasing each finished delivery from the broker's keep-alive, acked or not."""

    broker: JudgeStreamBroker  # taskiq declares its base broker type; this receiver is given ours

    def __init__(self, broker: JudgeStreamBroker, **kwargs: Any) -> None:
        super().__init__(broker, **kwargs)
        self.running: set[asyncio.Task[Any]] = set()

    async def callback(self, message: Any, raise_err: bool = False) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.running.add(task)
        token = _entry.set(message.entry_id if isinstance(message, StreamMessage) else None)
        try:
            await super().callback(message, raise_err)
        finally:
            _entry.reset(token)
            self.running.discard(task)
            if isinstance(message, StreamMessage):
                self.broker.held.discard(message.entry_id)


class Worker:
    """Grades jobs from the stream into `store`, `concurrency` at a time."""

    def __init__(self, broker_url: str, store: Store, *, concurrency: int = 32, reclaim_after: float = 30.0,
                 shutdown_timeout: float = 30.0, evaluators: Mapping[str, Any] | None = None,
                 consumer_name: str | None = None, rebuild: Rebuild | None = None,
                 requests_per_minute: float | None = None, max_deliveries: int = MAX_DELIVERIES,
                 key: str | bytes | None = None) -> None:
        self.store = store
        self.concurrency = concurrency
        self.shutdown_timeout = shutdown_timeout
        # None: only imported evaluators grade (jobs cannot pick a judge endpoint). Else how a job's
        # spec becomes an evaluator; the CLI passes `judgehooks resume`'s rule.
        self.rebuild = rebuild
        self.consumer_name = consumer_name or f"{socket.gethostname()}:{os.getpid()}"
        # key: given, else $JUDGEHOOKS_JOB_KEY; with one, unsigned or mis-signed jobs are refused
        self.broker = JudgeStreamBroker(broker_url, consumer_name=self.consumer_name, reclaim_after=reclaim_after,
                                        fetch_count=concurrency, max_connections=concurrency + 8,
                                        max_deliveries=max_deliveries, on_dead=self._dead_letter,
                                        job_key=job_key(key))
        self.broker.is_worker_process = True

        async def grade(job: str, context: Context = TaskiqDepends()) -> None:
            await self.grade(job, context)

        self.broker.register_task(grade, task_name=TASK_NAME)  # taskiq renames the function: not a method
        self.requests_per_minute = requests_per_minute  # for evaluators that set none of their own
        # Imported evaluators keep their judge, settings and callbacks; every record goes to `store`.
        self._pipelines: dict[str, Pipeline] = {
            name: self._fleet(dataclasses.replace(ev._pipeline, store=store))
            for name, ev in (evaluators or {}).items()}
        self.counts = {"graded": 0, "unavailable": 0, "store_failed": 0, "duplicate": 0}
        # SessionJudge(broker=...) sessions: graded here once due, under a lease of reclaim_after seconds
        self.sessions = SessionClock(self.broker, self._pipeline, self._failed, concurrency=concurrency,
                                     lease=reclaim_after, max_deliveries=max_deliveries)

    @property
    def signed_only(self) -> bool:
        """Whether this worker refuses jobs that are not signed with its key."""
        return self.broker.job_key is not None

    def stats(self) -> dict[str, Any]:
        """What this worker did: graded, unavailable, store_failed, duplicate (acked unjudged: its record
        was stored already), reclaimed, and refused (with reasons; the entries are in the
        `judgehooks:refused` stream)."""
        return {**self.counts, "reclaimed": self.broker.reclaimed, "refused": sum(self.broker.refused.values()),
                "refused_by_reason": dict(self.broker.refused), "refused_stream": REFUSED_STREAM,
                "signed_only": self.signed_only, "dead_lettered": self.broker.dead_lettered, **self.sessions.counts}

    def _fleet(self, pipeline: Pipeline) -> Pipeline:
        """A pipeline whose controls hold for the whole fleet, in Redis: its spend caps counted (fresh
        per-process counters), and its requests_per_minute (else the worker's --requests-per-minute)
        paced, keyed by judge model as in a process."""
        pool, spend, pace = self.broker.connection_pool, pipeline.spend, pipeline.pace
        if spend is not None:
            spend = dataclasses.replace(spend, ledger=RedisLedger(pool), skipped=0, _warned={})
        rate = pace.requests_per_minute if pace is not None else self.requests_per_minute
        if rate is not None:
            judge = pipeline.judge
            model = pace.model if pace is not None else judge.model if judge is not None else pipeline.name
            pace = Pace(rate, model, SharedRateLimiter(Redis(connection_pool=pool), KEY_PREFIX + model, rate))
        return dataclasses.replace(pipeline, spend=spend, pace=pace)

    def _pipeline(self, evaluator: str, spec_text: str | None) -> Pipeline:
        """The pipeline for a job: an imported evaluator's, else one rebuilt from the job's spec by
        `judgehooks resume`'s rule, else one whose every record is an EvaluatorUnavailable error."""
        key = f"{evaluator}\x1f{spec_text}"
        found = self._pipelines.get(evaluator) or self._pipelines.get(key)
        if found is not None:
            return found
        if self.rebuild is None:
            why = (f"evaluator {evaluator!r} is not among this worker's imported evaluators, and the worker grades "
                   f"only those: add --import <module that defines it> (or let it rebuild from jobs: --rebuild)")
        else:
            try:
                # spill=False: if the store is down the job stays unacked for a worker that can store it,
                # rather than waiting in a file on this worker's disk.
                built = self.rebuild(json.loads(spec_text) if spec_text else None, store=self.store,
                                     run_in_background=False, spill=False)
                pipeline: Pipeline = self._fleet(built._pipeline)  # the job's spend caps and rate, fleet-wide
                self._pipelines[key] = pipeline
                return pipeline
            except NotRebuildable as exc:
                why = (f"evaluator {evaluator!r} cannot be rebuilt from its job spec: {exc}; start the worker "
                       f"with --import <module that defines it>")
            except Exception as exc:  # settings this version cannot build: still one record, saying why
                why = (f"evaluator {evaluator!r} could not be rebuilt from its job spec: {type(exc).__name__}: "
                       f"{exc}; start the worker with --import <module that defines it>")
        return Pipeline(evaluator=_Unavailable(evaluator, why), store=self.store)  # not cached: a fix may follow

    async def grade(self, job: str, context: Context) -> None:
        """The taskiq task: one job in, one stored record out, then the ack."""
        try:
            data = json.loads(job)
            evaluator, rate = data["evaluator"], data.get("sample_rate", 1.0)
            ctx = job_context(Job("", evaluator, data["context"], rate))  # the outbox's refusals, by field
        except Exception as exc:  # not a judgehooks job: nothing to build a record from; kept in the refused stream
            await self.broker.refuse(None, str(job).encode("utf-8", "replace"), "bad_job",
                                     f"{type(exc).__name__}: {exc}")
            await context.ack()  # after the copy: a crash in between refuses it again, never loses it
            return
        pipeline = self._pipeline(evaluator, data.get("spec"))
        unavailable = isinstance(pipeline.evaluator, _Unavailable)
        self.counts["unavailable"] += unavailable
        # a replay or redelivery whose record is stored, or one another entry is grading now: never paid twice
        twice = not unavailable and (await pipeline.stored([pipeline.record_id(ctx)], scan=False)
                                     or not await self._claim(pipeline.record_id(ctx)))
        # stored: acked; not stored: left unacked, so it is reclaimed (under its claim) and graded again
        settled = await settle(pipeline, None if twice else await pipeline.grade(ctx, rate), context.ack,
                               lambda: asyncio.sleep(0))
        self.counts["duplicate" if twice else settled] += 1

    async def _claim(self, record_id: str) -> bool:
        """Whether this delivery grades `record_id`: its claim in Redis is taken by this stream entry
        (SET NX), or was by this same entry before (a worker died holding it, and the entry was reclaimed).
        A replay of a job, a new entry for the same record, finds it held and is not paid for."""
        entry = _entry.get() or f"{self.consumer_name}:{id(asyncio.current_task())}"
        async with Redis(connection_pool=self.broker.connection_pool) as conn:
            for _ in range(2):  # a claim that expired between the SET and the GET: try once more
                if await conn.set(CLAIM_PREFIX + record_id, entry, nx=True, ex=CLAIM_TTL_S):
                    return True
                holder = await conn.get(CLAIM_PREFIX + record_id)
                if holder is not None:
                    return bool(text(holder) == entry)
        return False

    def _failed(self, evaluator: str, why: str) -> Pipeline:
        """A pipeline whose record is one `error` saying why: a job or session no worker finished, or
        a session whose turns Redis changed."""
        return Pipeline(evaluator=_Unavailable(evaluator, why, dead_letter=True), store=self.store)

    async def _dead_letter(self, data: bytes, deliveries: int) -> None:
        """A job no worker finished (the broker moved it to the dead-letter stream): its run gets one
        `error` record saying so, never just silence."""
        job = json.loads(self.broker.formatter.loads(data).kwargs["job"])
        why = (f"the job was delivered {deliveries} times and no worker finished it (each died, stopped or could "
               f"not store its record); it is kept in the Redis stream {DEAD_STREAM!r}")
        await self._failed(str(job["evaluator"]), why).evaluate(context_from_dict(job["context"]),
                                                                    float(job.get("sample_rate", 1.0)))

    async def serve(self, stop: asyncio.Event, ready: Callable[[], None] | None = None) -> None:
        """Grade until `stop` is set; then take nothing new, give running jobs `shutdown_timeout`
        seconds, and cancel the rest (unacked: another worker reclaims them)."""
        receiver = _Receiver(self.broker, max_async_tasks=self.concurrency, max_prefetch=0, run_startup=False,
                             ack_type=AcknowledgeType.MANUAL, wait_tasks_timeout=self.shutdown_timeout,
                             propagate_exceptions=False)
        # litellm's import takes seconds: off the loop and before the first job, or it stalls them all.
        await asyncio.to_thread(load_litellm)
        await self.broker.startup()  # connects, and creates the stream and group if this is the first worker
        if ready is not None:
            ready()
        keep_alive = asyncio.create_task(self.broker.keep_alive())
        sessions = asyncio.create_task(self.sessions.serve(stop, self.shutdown_timeout))
        try:
            await receiver.listen(stop)
            await sessions
        finally:
            left = list(receiver.running)
            for task in (keep_alive, sessions, *left):
                task.cancel()
            await asyncio.gather(keep_alive, sessions, *left, return_exceptions=True)
            if left:
                log.warning("worker_left_jobs_pending", consumer=self.consumer_name, jobs=len(left),
                            note="unacked: reclaimed by a live worker")
            try:
                await asyncio.wait_for(self.broker.shutdown(), 5)
            except Exception:
                log.exception("broker_shutdown_failed")
