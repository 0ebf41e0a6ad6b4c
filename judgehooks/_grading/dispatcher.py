"""The background dispatcher: the hook persists a job and hands it off; grading happens here.

Caller side (any thread, any event loop, ~tens of microseconds): sampling decision, snapshot,
`Outbox.put` (unless the byte budget is spent), then the `Inbox`. Loop side (the judgehooks loop
thread, or the application's loop inside `judgehooks.lifespan()`): a queue bounded in jobs and
bytes, `max_concurrency` workers, an overload policy (by default a full queue sheds at once, so a
hanging judge never stalls the runs), batched store writes, then the outbox row is deleted. Every
shed job becomes a `skipped` record; every graded one a passed/failed/error record.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from functools import partial
from typing import Any, Literal

import anyio.to_thread

from .._base.context import EvalContext, context_from_dict, context_to_dict
from .._base.jsondata import json_bytes
from .._base.log import log
from .._base.record import EvalRecord
from .._judges.base import BaseJudge
from .._runtime import runtime
from ..stores import BaseStore
from .budget import DEFAULT_MAX_QUEUE_BYTES, ByteBudget
from .counters import Counters
from .doorbell import Doorbell
from .inbox import Inbox
from .outbox import QUEUED, Job, Outbox, jobs_of
from .pipeline import Pipeline
from .step import Requeue, Step
from .tasks import current_loop, noop, run_on, safe, spawn, wait_with_timeout
from .upkeep import upkeep
from .writes import PendingWrites

Overload = Literal["block", "drop_newest", "drop_oldest"]
OVERLOAD_POLICIES: tuple[str, ...] = ("block", "drop_newest", "drop_oldest")


class Dispatcher:
    """Runs a step (by default: grade) on submitted contexts, on the judgehooks loop, bounded and durable."""

    def __init__(self, pipeline: Pipeline, *, outbox: Outbox | None, step: Step | None = None,
                 max_queue: int = 10_000, max_concurrency: int = 32, overload: Overload = "drop_newest",
                 block_timeout: float = 5.0, spec: dict[str, Any] | None = None,
                 batch_size: int = 64, flush_interval: float = 0.02, sampling: Any = None,
                 judges_here: bool = True, describe: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES) -> None:
        self.pipeline = pipeline
        self._step: Step = step if step is not None else self._judge
        self.judges_here = judges_here  # False when the step hands jobs on (no judge warm-up here)
        self._describe, self.outbox = describe, outbox
        self.max_queue = max_queue
        self.max_concurrency, self.overload, self.block_timeout = max_concurrency, overload, block_timeout
        self.spec = None if spec is None else json.dumps(spec)  # once, not on every hook call
        self.counters = Counters()
        self.budget = ByteBudget(max_queue_bytes)
        self._sampling = sampling
        self._slots = threading.BoundedSemaphore(max_queue)  # queued (not yet started) jobs
        self._lock = threading.Lock()  # counters touched from caller threads
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None  # where the workers run; changes only in relocate()
        # loop-side state, touched only on self._loop
        self._queue: collections.deque[tuple[Job, EvalContext, bool]] = collections.deque()
        self._inbox = Inbox(self._lock, lambda: self._loop, self._accept)  # callers' hand-offs, one wake-up a batch
        self._ready: Doorbell | None = None  # wakes one idle worker per job
        self._idle: asyncio.Event | None = None
        self._paused = False  # set while the workers move to another loop
        self._scope: anyio.CancelScope | None = None
        self._stopped: asyncio.Event | None = None
        self._in_flight = self._notifying = self._writing = 0
        self._to_write = PendingWrites(batch_size, flush_interval)
        self._claiming = False

    @property
    def name(self) -> str:
        return self.pipeline.name

    # ---- caller side --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the workers (on the judgehooks loop, or the app's loop inside `judgehooks.lifespan()`),
        and resume this evaluator's orphaned jobs."""
        if self._started:
            return
        with self._lock:
            if self._started:
                return
            self._launch(runtime.home_loop())
            self._started = True
            runtime.add_drainable(self)
            judge = self.pipeline.judge
            if self.judges_here and isinstance(judge, BaseJudge):  # e.g. import litellm before the first job
                threading.Thread(target=judge.warm_up, name="judgehooks-warmup", daemon=True).start()

    def _launch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start serving on `loop` (from any thread). Jobs already queued are picked up there."""
        self._loop = loop
        loop.call_soon_threadsafe(self._begin)
        self._inbox.moved(loop)

    def _begin(self) -> None:
        self._ready, self._idle = Doorbell(), asyncio.Event()
        self._to_write.start()
        self._stopped = asyncio.Event()
        self._paused = False
        self._claiming = self.outbox is not None  # not idle before the first look for a dead process's jobs
        if self._queue:
            self._ready.ring(len(self._queue))
        self._maybe_idle()
        spawn(self._serve())

    async def relocate(self, loop: asyncio.AbstractEventLoop) -> None:
        """Move the workers to `loop`: the old loop finishes its in-flight jobs, writes and
        callbacks, then the queue (untouched, in order) is served on the new one."""
        old = self._loop
        if not self._started or old is loop:
            return
        assert old is not None
        await run_on(old, self._quiesce)
        with self._lock:
            self._launch(loop)  # hand-offs from now on go to the new loop
        await run_on(old, noop)  # hand-offs scheduled on the old loop before the switch have been forwarded

    async def _quiesce(self) -> None:
        self._paused = True
        await asyncio.sleep(0)  # let shed tasks already spawned enqueue their records
        while self._in_flight or self._to_write or self._writing or self._notifying:
            await asyncio.sleep(0.005)
        assert self._scope is not None and self._stopped is not None
        self._scope.cancel()
        await self._stopped.wait()

    def _persist(self, ctx: EvalContext, sample_rate: float) -> tuple[Job, str | None]:
        """The job, in the outbox unless the byte budget has no room for it (then: why it is shed)."""
        self.start()
        raw, outbox = json_bytes(context_to_dict(ctx)), self.outbox
        # the job as the queue holds it, beside its EvalContext: the outbox takes the context's JSON
        job = Job(self.pipeline.record_id(ctx), self.pipeline.name, QUEUED, sample_rate, self.spec, time.time())
        shed = self.budget.admit(job.id, len(raw), None if outbox is None else
                                 partial(outbox.put, job, raw.decode(), run_id=ctx.run_id))
        with self._lock:
            self.counters.submitted += 1
        return job, shed

    def submit(self, ctx: EvalContext, sample_rate: float = 1.0) -> None:
        """Persist and hand off one evaluation (sync callers). Never blocks past `block_timeout`."""
        job, shed = self._persist(ctx, sample_rate)
        holds_slot = shed is None and self.overload == "block" and self._slots.acquire(timeout=self.block_timeout)
        self._inbox.put((job, ctx, holds_slot, shed))

    async def asubmit(self, ctx: EvalContext, sample_rate: float = 1.0) -> None:
        """`submit` for callers on an event loop: waiting for room happens off their loop."""
        job, shed = self._persist(ctx, sample_rate)
        holds_slot = False
        if shed is None and self.overload == "block":
            holds_slot = self._slots.acquire(blocking=False) or await anyio.to_thread.run_sync(
                lambda: self._slots.acquire(timeout=self.block_timeout))
        self._inbox.put((job, ctx, holds_slot, shed))

    # ---- loop side ----------------------------------------------------------------------------

    def _accept(self, job: Job, ctx: EvalContext, holds_slot: bool, shed: str | None) -> None:
        if asyncio.get_running_loop() is not self._loop:  # scheduled just before a relocation
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._accept, job, ctx, holds_slot, shed)
            return
        full = len(self._queue) >= self.max_queue
        if shed is None and self.overload == "block" and not holds_slot:
            shed = f"queue full: no room within {self.block_timeout:g}s (block)"
        elif shed is None and self.overload == "drop_newest" and full:
            shed = "queue full: newest dropped (drop_newest)"
        if shed is not None:  # over the byte budget (never in the outbox) or no room: never queued
            spawn(self._shed(job, ctx, shed))
            return
        if self.overload == "drop_oldest" and full:
            old_job, old_ctx, _ = self._queue.popleft()
            spawn(self._shed(old_job, old_ctx, "queue full: oldest dropped (drop_oldest)"))
        self._queue.append((job, ctx, holds_slot))
        assert self._ready is not None and self._idle is not None
        self._idle.clear()
        self._ready.ring()

    async def _shed(self, job: Job, ctx: EvalContext, reason: str) -> None:
        """A `skipped` record, written and called back (`on_drop`) like any other record."""
        record = self.pipeline.skipped(ctx, reason, job.sample_rate)
        with self._lock:
            self.counters.shed(reason)
        log.warning("evaluation_dropped", evaluator=record.evaluator, run_id=record.run_id, reason=reason,
                    queue_depth=len(self._queue))
        self._enqueue_write(record, job.id, notify=True)

    async def _serve(self) -> None:
        stopped = self._stopped
        assert stopped is not None
        try:
            with anyio.CancelScope() as self._scope:
                async with anyio.create_task_group() as tg:
                    for _ in range(self.max_concurrency):
                        tg.start_soon(self._worker)
                    tg.start_soon(self._writer)
                    if self.outbox is not None:
                        tg.start_soon(upkeep, self.outbox, self.pipeline.name, self._room, self._take, self._settled,
                                      lambda: not self._idle or not self._idle.is_set())  # idle: done lines written
        finally:
            stopped.set()

    async def _worker(self) -> None:
        assert self._ready is not None
        while True:
            if not self._queue or self._paused:
                self._maybe_idle()
                await self._ready.wait()
                continue
            job, ctx, holds_slot = self._queue.popleft()
            if holds_slot:
                self._slots.release()
            self._in_flight += 1
            try:
                await self._run_step(job, ctx)
            except Exception:  # a bug, never judge trouble (that is an error record): the job stays
                self.budget.release([job.id])  # in the outbox for the next process, not in this queue
                log.exception("background_evaluation_crashed", evaluator=job.evaluator, job_id=job.id)
            finally:
                self._in_flight -= 1
                self._maybe_idle()

    async def _judge(self, job: Job, ctx: EvalContext, moving: Callable[[], bool]) -> EvalRecord:
        """The default step: grade the job (its judge calls paced by `Pipeline.grade`)."""
        return await self.pipeline.grade(ctx, job.sample_rate)

    async def _run_step(self, job: Job, ctx: EvalContext) -> None:
        try:
            record = await self._step(job, ctx, lambda: self._paused)
        except Requeue:
            self._queue.appendleft((job, ctx, False))
            return
        with self._lock:
            self.counters.finished(record)
        self._enqueue_write(record, job.id, notify=record is not None)

    def _enqueue_write(self, record: EvalRecord | None, job_id: str | None, *, notify: bool = False) -> None:
        if asyncio.get_running_loop() is not self._loop:  # a shed task on the loop the workers just left
            assert self._loop is not None
            self._loop.call_soon_threadsafe(partial(self._enqueue_write, record, job_id, notify=notify))
            return
        assert self._idle is not None
        self._to_write.add((record, job_id, notify))
        self._idle.clear()

    async def _writer(self) -> None:
        """Batched store writes; the outbox rows go only once their records are stored."""
        while True:
            if not self._to_write:
                self._maybe_idle()
                await self._to_write.gather()
                continue
            batch = self._to_write.take()
            self._writing += 1
            try:
                records = [r for r, _, _ in batch if r is not None]  # None: a job finished without a record
                quiet = {id(r) for r, _, notify in batch if r is not None and not notify}
                handed_on = [j for r, j, _ in batch if r is None and j is not None]
                if handed_on:  # published: no record here
                    await self._release(handed_on)
                jobs = jobs_of(batch)  # the stored records' outbox rows go: see jobs_of for why not by record id
                error = await self.pipeline.deliver(records, quiet=quiet, on_stored=partial(self._release, via=jobs),
                                                    spawn=self._spawn_notify)
                if error is not None:  # these jobs stay in the outbox: the next process regrades them
                    self.budget.release({j for r in error.records for j in jobs.get(r.id, ())})
                    with self._lock:
                        self.counters.store_failures += len(error.records)
            except Exception:  # a bug: the batch's jobs stay in the outbox, the writer goes on
                self.budget.release(j for _, j, _ in batch if j is not None)
                log.exception("background_write_failed", jobs=len(batch))
            finally:
                self._writing -= 1
            self._maybe_idle()

    async def _release(self, ids: Iterable[str], via: Mapping[str, set[str]] | None = None) -> None:
        """Their records are stored: the jobs' outbox rows can go (`via`: the jobs of each record id)."""
        jobs = list(ids) if via is None else sorted({j for i in ids for j in via.get(i, ())})
        self.budget.release(jobs)
        outbox = self.outbox
        if outbox is not None and jobs:
            try:
                if not outbox.delete_at_once(jobs):  # one line now is cheaper than a hop to a thread and back
                    await anyio.to_thread.run_sync(outbox.delete, jobs)
            except Exception:
                log.exception("outbox_delete_failed", jobs=len(jobs))

    def _spawn_notify(self, notify: Coroutine[Any, Any, None]) -> None:
        self._notifying += 1
        spawn(self._notified(notify))

    async def _notified(self, notify: Coroutine[Any, Any, None]) -> None:
        try:
            await notify
        finally:
            self._notifying -= 1
            self._maybe_idle()

    def _room(self) -> int:
        """How many orphaned jobs to claim now: none while moving or over the byte budget."""
        if self._paused or self.budget.held >= self.budget.limit:
            return 0
        return self.max_queue - len(self._queue)

    async def _take(self, jobs: list[Job]) -> None:
        """Queue the jobs claimed from the outbox, but those whose records the store holds already
        (a process died between storing them and deleting their rows): their rows go, unjudged."""
        self._claiming = True  # not idle while the store is asked: the claimed jobs are nowhere yet
        claimed = [(job, context_from_dict(job.context)) for job in jobs]
        ids = {job.id: self.pipeline.record_id(ctx) for job, ctx in claimed}
        stored = await self.pipeline.stored(set(ids.values()))
        twice = {job_id for job_id, record in ids.items() if record in stored}
        if twice:
            log.info("outbox_already_stored", evaluator=self.pipeline.name, jobs=len(twice))
            await self._release(twice)
        for job, ctx in claimed:
            if job.id not in twice:
                self.budget.take(job.id, job.size, force=True)
                self._queue.append((job.queued(), ctx, False))
        with self._lock:
            self.counters.resumed += len(jobs) - len(twice)
            self.counters.duplicates += len(twice)
        assert self._ready is not None and self._idle is not None
        self._idle.clear()
        self._ready.ring(len(jobs) - len(twice))

    def _settled(self) -> None:
        if self._claiming:
            self._claiming = False
            self._maybe_idle()

    def _maybe_idle(self) -> None:
        if self._idle is not None and not self._queue and not self._in_flight and not self._to_write \
                and not self._writing and not self._notifying and not self._claiming:
            self._idle.set()

    def reset_after_fork(self) -> None:
        """In a forked child: forget the parent's loop and in-memory queue; start afresh on next use."""
        self._started, self._loop = False, None
        self._to_write.clear()
        self._queue.clear()
        self._in_flight = self._writing = self._notifying = 0
        self._lock = threading.Lock()
        self._inbox = Inbox(self._lock, lambda: self._loop, self._accept)
        self._slots = threading.BoundedSemaphore(self.max_queue)
        self.counters = Counters()
        self.budget.reset()
        if self.outbox is not None:
            self.outbox.reset_after_fork()

    # ---- observation and shutdown ---------------------------------------------------------------

    def release(self) -> None:
        """At exit, after the drain: unfinished jobs stay in the outbox for the next process."""
        if self.outbox is not None:
            self.outbox.release()

    async def _wait_idle(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Wait on `loop` until idle; False if the workers moved to another loop meanwhile."""
        while self._loop is loop:
            idle = self._idle
            assert idle is not None
            with anyio.move_on_after(0.2):  # wake now and then to notice a relocation
                await idle.wait()
            await asyncio.sleep(0)  # let call_soon_threadsafe hand-offs already scheduled land
            if idle.is_set() and self._idle is idle and not self._paused:
                return True
        return False

    def drain(self, timeout: float | None) -> bool:
        """Wait until every submitted job is graded, stored and called back. Not from the loop
        the workers run on (use `await judgehooks.adrain()` there)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._started:
            loop = self._loop
            assert loop is not None
            if current_loop() is loop:
                raise RuntimeError("drain() would block the event loop the evaluations run on: "
                                   "use `await judgehooks.adrain()`")
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            future = asyncio.run_coroutine_threadsafe(wait_with_timeout(self._wait_idle, loop, left), loop)
            try:
                if future.result():
                    return True
            except TimeoutError:
                return False
        return True

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counters = self.counters.as_dict()
        if self._sampling is not None:
            counters.update(sampled_out=self._sampling.sampled_out, filtered_out=self._sampling.filtered_out)
        counters.update(queue_depth=len(self._queue), in_flight=self._in_flight, queued_bytes=self.budget.held,
                        evaluator=self.pipeline.name,
                        loop="app" if runtime.is_app_loop(self._loop) else "judgehooks",
                        oldest_pending_age_s=None if self.outbox is None else safe(
                            partial(self.outbox.oldest_age, self.name)),
                        outbox=None if self.outbox is None else self.outbox.path,
                        outbox_failures=0 if self.outbox is None else self.outbox.refused)
        if self.pipeline.spend is not None:  # runs over a spend cap: skipped with reason "budget"
            counters.update(self.pipeline.spend.stats())
        if self._describe is not None:
            counters.update(self._describe(counters))
        store = self.pipeline.store
        if isinstance(store, BaseStore):  # a SpillingStore adds spilled, redelivered, pending
            counters.update(safe(store.stats) or {})
        return counters
