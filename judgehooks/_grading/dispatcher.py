"""The background dispatcher: the hook puts a job in the job log and hands it off; grading happens here.

    submit -> JobLog.put -> work.add -> (hand-off) -> JobQueue -> worker: step (Pipeline.grade)
        -> writer: Pipeline.store_batch -> JobLog.done -> Pipeline.notify (callbacks) -> work.done

The caller's side costs tens of microseconds on any thread or loop. The loop side (the judgehooks
loop, or the app's inside `judgehooks.lifespan()`) bounds the queue in jobs and bytes, sheds by the
overload policy (a shed job is a `skipped` record), grades with `max_concurrency` workers and
writes in batches. `drain()` waits for `work`, the one count of unfinished jobs, to reach zero.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import anyio.to_thread

from .._base.context import EvalContext, context_to_dict
from .._base.jsondata import json_bytes
from .._base.log import log
from .._base.record import EvalRecord
from .._judges.base import BaseJudge
from .._runtime import runtime
from ..stores import BaseStore
from .budget import DEFAULT_MAX_QUEUE_BYTES, ByteBudget
from .counters import Counters
from .journal import JournalLog
from .outbox import QUEUED, Job, Outbox, jobs_of, read_jobs
from .pipeline import Pipeline
from .step import Requeue, Step
from .tasks import current_loop, run_on, safe, spawn
from .work import JobQueue, Overload, Unfinished, next_batch, overloaded

#: seconds the loop a sync caller (run()) woke waits before it takes the jobs handed off: it lets go
#: of the GIL first, and the hook returns at once (arun()'s hook measured slower)
ACCEPT_AFTER_S = 0.001
#: seconds between the upkeep's looks for a dead process's jobs (and its heartbeat and checkpoint)
UPKEEP_S = 1.0


class Dispatcher:
    """Runs a step (by default: grade) on submitted contexts, on the judgehooks loop, bounded and durable."""

    def __init__(self, pipeline: Pipeline, *, outbox: JournalLog | Outbox | None, step: Step | None = None,
                 max_queue: int = 10_000, max_concurrency: int = 32, overload: Overload = "drop_newest",
                 block_timeout: float = 5.0, spec: dict[str, Any] | None = None,
                 batch_size: int = 64, flush_interval: float = 0.02, sampling: Any = None,
                 judges_here: bool = True, describe: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES) -> None:
        self.pipeline = pipeline
        # the default step grades the job (its judge calls paced by `Pipeline.grade`)
        self._step: Step = step or (lambda job, ctx, moving: pipeline.grade(ctx, job.sample_rate))
        self.judges_here = judges_here  # False when the step hands jobs on (no judge warm-up here)
        self._describe, self.outbox = describe, outbox
        self.max_queue, self.batch_size, self.flush_interval = max_queue, batch_size, flush_interval
        self.max_concurrency, self.overload, self.block_timeout = max_concurrency, overload, block_timeout
        self.spec = None if spec is None else json.dumps(spec)  # once, not on every hook call
        self.budget = ByteBudget(max_queue_bytes)
        self._sampling = sampling
        self._fresh()

    def _fresh(self) -> None:
        """The state of a dispatcher that has not started (again after a fork)."""
        self.counters = Counters()
        self.work = Unfinished()  # THE idle signal: accepted jobs not yet stored and called back
        self._lock = threading.Lock()  # the loop a hand-off goes to; counters touched from caller threads
        self._slots = threading.BoundedSemaphore(self.max_queue)  # overload="block": queued jobs
        self._loop: asyncio.AbstractEventLoop | None = None  # where the workers run (None: not started yet)
        self._queue = JobQueue()
        self._arrived: list[tuple[Job, EvalContext, bool, str | None]] = []  # handed off, not taken on the loop yet
        self._writes: asyncio.Queue[tuple[EvalRecord | None, str | None]] | None = None
        self._in_flight = 0  # jobs in a step (stats only)
        self._here = 0  # jobs out of the queue on this loop, not finished (relocate() waits for none)
        self._none_here: asyncio.Event | None = None
        self._paused = False  # set while the workers move to another loop
        self._first_look = False  # the upkeep has not looked for a dead process's jobs yet
        self._scope: anyio.CancelScope | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def name(self) -> str:
        return self.pipeline.name

    # ---- caller side --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the workers (on the judgehooks loop, or the app's loop inside `judgehooks.lifespan()`),
        and resume this evaluator's orphaned jobs."""
        if self._loop is not None:
            return
        with self._lock:
            if self._loop is not None:
                return
            if self.outbox is not None:  # not idle before the upkeep's first look for a dead process's jobs
                self._first_look = True
                self.work.add()
            runtime.add_drainable(self)
            self._launch(runtime.home_loop())  # last: a loop set says the dispatcher has started
            judge = self.pipeline.judge
            if self.judges_here and isinstance(judge, BaseJudge):  # e.g. import litellm before the first job
                threading.Thread(target=judge.warm_up, name="judgehooks-warmup", daemon=True).start()

    def _launch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start serving on `loop` (from any thread, holding the lock). Jobs already queued are picked up there."""
        self._loop = loop
        loop.call_soon_threadsafe(self._begin)

    def _begin(self) -> None:
        self._queue = self._queue.moved()  # bound to this loop when a worker first waits
        self._writes = asyncio.Queue()
        self._none_here = asyncio.Event()
        self._none_here.set()
        self._stopped = asyncio.Event()
        self._paused = False
        spawn(self._serve())

    def _persist(self, ctx: EvalContext, sample_rate: float) -> tuple[Job, str | None]:
        """The job, in the job log unless the byte budget has no room for it (then: why it is shed)."""
        self.start()
        raw, outbox = json_bytes(context_to_dict(ctx)), self.outbox
        # the job as the queue holds it, beside its EvalContext: the outbox takes the context's JSON
        job = Job(self.pipeline.record_id(ctx), self.pipeline.name, QUEUED, sample_rate, self.spec, time.time())
        shed = self.budget.admit(job.id, len(raw), None if outbox is None else
                                 partial(outbox.put, job, raw.decode(), run_id=ctx.run_id))
        with self._lock:
            self.counters.submitted += 1
        return job, shed

    def _hand_off(self, job: Job, ctx: EvalContext, holds_slot: bool, shed: str | None, *, later: bool) -> None:
        self.work.add()
        try:
            with self._lock:  # a relocation never falls between reading the loop and waking it
                loop = self._loop
                assert loop is not None
                if not self._arrived or loop.is_closed():  # one wake a burst (a closed loop raises, as ever)
                    take = self._accept_arrived
                    loop.call_soon_threadsafe(partial(loop.call_later, ACCEPT_AFTER_S, take) if later else take)
                self._arrived.append((job, ctx, holds_slot, shed))
        except BaseException:  # a closed loop: not handed off (the job stays in the job log)
            self.work.done()
            raise

    def submit(self, ctx: EvalContext, sample_rate: float = 1.0) -> None:
        """Persist and hand off one evaluation (sync callers). Never blocks past `block_timeout`."""
        job, shed = self._persist(ctx, sample_rate)
        holds_slot = shed is None and self.overload == "block" and self._slots.acquire(timeout=self.block_timeout)
        self._hand_off(job, ctx, holds_slot, shed, later=True)

    async def asubmit(self, ctx: EvalContext, sample_rate: float = 1.0) -> None:
        """`submit` for callers on an event loop: waiting for room happens off their loop."""
        job, shed = self._persist(ctx, sample_rate)
        holds_slot = False
        if shed is None and self.overload == "block":
            holds_slot = self._slots.acquire(blocking=False) or await anyio.to_thread.run_sync(
                lambda: self._slots.acquire(timeout=self.block_timeout))
        self._hand_off(job, ctx, holds_slot, shed, later=False)

    # ---- loop side ----------------------------------------------------------------------------

    def _accept_arrived(self) -> None:
        """Queue every job handed off since the loop was woken (woken on the loop a relocation left:
        the new one takes them), under the lock a relocation moves the queue under; then shed the rest."""
        shed: list[tuple[Job, EvalContext, str]] = []
        with self._lock:
            if self._loop is not asyncio.get_running_loop():
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._accept_arrived)
                return
            arrived, self._arrived = self._arrived, []
            for job, ctx, holds_slot, why in arrived:
                full = self._queue.qsize() >= self.max_queue
                why = why or overloaded(self.overload, full, holds_slot, self.block_timeout)
                if why is not None:  # over the byte budget (never in the job log) or no room: never queued
                    shed.append((job, ctx, why))
                    continue
                if self.overload == "drop_oldest" and full:
                    old_job, old_ctx, _ = self._queue.get_nowait()
                    shed.append((old_job, old_ctx, "queue full: oldest dropped (drop_oldest)"))
                self._queue.put_nowait((job, ctx, holds_slot))
        for job, ctx, why in shed:
            self._shed(job, ctx, why)

    def _shed(self, job: Job, ctx: EvalContext, reason: str) -> None:
        """A `skipped` record, written and called back (`on_drop`) like any other record."""
        record = self.pipeline.skipped(ctx, reason, job.sample_rate)
        with self._lock:
            self.counters.shed(reason)
        log.warning("evaluation_dropped", evaluator=record.evaluator, run_id=record.run_id, reason=reason,
                    queue_depth=self._queue.qsize())
        self._taken()
        self._write(record, job.id)

    def _taken(self) -> None:
        """A job left the queue on this loop (to a worker, or shed)."""
        assert self._none_here is not None
        self._here += 1
        self._none_here.clear()

    def _finished(self, n: int = 1, *, back: int = 0) -> None:
        """`n` jobs taken here are finished: graded, stored and called back (or left in the job log);
        `back` more went back to the queue."""
        assert self._none_here is not None
        self._here -= n + back
        if not self._here:
            self._none_here.set()
        if n:
            self.work.done(n)

    def _write(self, record: EvalRecord | None, job_id: str | None) -> None:
        self._writes.put_nowait((record, job_id))  # type: ignore[union-attr]

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
                        tg.start_soon(self._upkeep, self.outbox)
        finally:
            stopped.set()

    async def _worker(self) -> None:
        while True:
            item = await self._queue.get()
            if self._paused:  # moving to another loop: the job goes first there
                self._queue.put_front(item)
                await anyio.sleep_forever()
            job, ctx, holds_slot = item
            if holds_slot:
                self._slots.release()
            self._taken()
            self._in_flight += 1
            try:
                record = await self._step(job, ctx, lambda: self._paused)
            except Requeue:
                self._queue.put_front((job, ctx, False))
                self._finished(0, back=1)
                continue
            except Exception:  # a bug, never judge trouble (that is an error record): the job stays
                self.budget.release([job.id])  # in the job log for the next process, not in this queue
                log.exception("background_evaluation_crashed", evaluator=job.evaluator, job_id=job.id)
                self._finished()
                continue
            finally:
                self._in_flight -= 1
            with self._lock:
                self.counters.finished(record)
            self._write(record, job.id)  # None: handed on (published), no record here

    async def _writer(self) -> None:
        """Batched store writes; the jobs' rows go from the job log only once their records are stored."""
        writes = self._writes
        assert writes is not None
        while True:
            batch = await next_batch(writes, self.batch_size, self.flush_interval)
            records = [r for r, _ in batch if r is not None]
            try:
                stored, error = await self.pipeline.store_batch(records)
                jobs = jobs_of(batch)  # see jobs_of for why not by record id
                await self._done([j for r, j in batch if r is None and j is not None]  # handed on
                                 + sorted({j for i in stored for j in jobs.get(i, ())}))
                if error is not None:  # these jobs stay in the job log: the next process regrades them
                    self.budget.release({j for r in error.records for j in jobs.get(r.id, ())})
                    with self._lock:
                        self.counters.store_failures += len(error.records)
            except Exception:  # a bug: the batch's jobs stay in the job log, the writer goes on
                self.budget.release(j for _, j in batch if j is not None)
                log.exception("background_write_failed", jobs=len(batch))
                self._finished(len(batch))
                continue
            self._finished(len(batch) - len(records))  # handed on: nothing to call back
            for record in records:
                if self.pipeline.calls_back(record):  # a slow callback never holds the next write
                    spawn(self._announce(record, record.id in stored))
                else:
                    await self._announce(record, record.id in stored)

    async def _announce(self, record: EvalRecord, stored: bool) -> None:
        try:
            await self.pipeline.notify(record, stored=stored)
        finally:
            self._finished()

    async def _done(self, job_ids: list[str]) -> None:
        """Their records are stored (or they were handed on): their rows go from the job log."""
        self.budget.release(job_ids)
        if self.outbox is not None and job_ids:
            try:
                await anyio.to_thread.run_sync(self.outbox.done, job_ids)
            except Exception:
                log.exception("outbox_delete_failed", jobs=len(job_ids))

    # ---- the upkeep: a dead process's jobs, this one's heartbeat, the WAL ---------------------

    async def _upkeep(self, outbox: JournalLog | Outbox) -> None:
        """Every `UPKEEP_S`: claim as many of this evaluator's orphaned jobs as there is room for (and
        look again at once while there are more), beat this owner's heart, checkpoint the WAL."""
        while True:
            try:
                room = 0 if self._paused or self.budget.held >= self.budget.limit else \
                    self.max_queue - self._queue.qsize()
                jobs = await anyio.to_thread.run_sync(self._look, outbox, room)
                if jobs:
                    await self._take(jobs)
                    log.info("outbox_resumed", evaluator=self.name, jobs=len(jobs))
                    continue
            except Exception:
                log.exception("outbox_maintenance_failed", outbox=outbox.path)
            if self._first_look:
                self._first_look = False
                self.work.done()
            await anyio.sleep(UPKEEP_S)

    def _look(self, outbox: JournalLog | Outbox, room: int) -> list[Job]:  # on a worker thread: one trip a round
        try:
            return outbox.claim([self.name], room, self.budget.limit) if room > 0 else []
        finally:  # the journal's fold too: a younger file's jobs mostly finish first, unless nothing is unfinished
            outbox.upkeep(idle=not int(self.work))

    async def _take(self, jobs: list[Job]) -> None:
        """Queue the jobs claimed from the job log, but those whose records the store holds already (a
        process died between storing them and deleting their rows: their rows go, unjudged) or no job."""
        claimed, unreadable = read_jobs(jobs)
        for job, why in unreadable:  # rows no process of ours wrote: error records, never a stalled claim
            self.work.add()
            self._taken()
            self._write(self.pipeline.unreadable(job.id, why), job.id)
        self.work.add(len(claimed))
        ids = {job.id: self.pipeline.record_id(ctx) for job, ctx in claimed}
        try:
            stored = await self.pipeline.stored(set(ids.values()))
        except BaseException:
            self.work.done(len(claimed))  # they stay claimed by this owner: the next process takes them
            raise
        twice = [job_id for job_id, record in ids.items() if record in stored]
        if twice:
            log.info("outbox_already_stored", evaluator=self.name, jobs=len(twice))
            await self._done(twice)
            self.work.done(len(twice))
        for job, ctx in claimed:
            if job.id not in twice:
                self.budget.take(job.id, job.size, force=True)
                self._queue.put_nowait((job.queued(), ctx, False))
        with self._lock:
            self.counters.resumed += len(jobs) - len(twice)
            self.counters.duplicates += len(twice)

    # ---- moving, forking, observation and shutdown ----------------------------------------------

    async def relocate(self, loop: asyncio.AbstractEventLoop) -> None:
        """Move the workers to `loop`: the old loop finishes the jobs it has taken (their writes and
        callbacks included), then the queue (untouched, in order) is served on the new one."""
        old = self._loop
        if old is None or old is loop:
            return
        await run_on(old, self._quiesce)
        with self._lock:
            self._launch(loop)  # hand-offs from now on go to the new loop
        await run_on(old, partial(asyncio.sleep, ACCEPT_AFTER_S))  # the old loop's hand-offs are forwarded

    async def _quiesce(self) -> None:
        self._paused = True
        assert self._none_here is not None and self._scope is not None and self._stopped is not None
        await self._none_here.wait()
        self._scope.cancel()
        await self._stopped.wait()

    def reset_after_fork(self) -> None:
        """In a forked child: forget the parent's loop and in-memory queue; start afresh on next use."""
        self._fresh()
        self.budget.reset()
        if self.outbox is not None:
            self.outbox.reset_after_fork()

    def release(self) -> None:
        """At exit, after the drain: unfinished jobs stay in the job log for the next process."""
        if self.outbox is not None:
            self.outbox.release()

    def drain(self, timeout: float | None) -> bool:
        """Wait until every submitted job is graded, stored and called back. Not from the loop
        the workers run on (use `await judgehooks.adrain()` there)."""
        if self._loop is not None and current_loop() is self._loop:
            raise RuntimeError("drain() would block the event loop the evaluations run on: "
                               "use `await judgehooks.adrain()`")
        return self.work.wait(timeout)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counters = self.counters.as_dict()
        if self._sampling is not None:
            counters.update(sampled_out=self._sampling.sampled_out, filtered_out=self._sampling.filtered_out)
        counters.update(queue_depth=self._queue.qsize(), in_flight=self._in_flight, queued_bytes=self.budget.held,
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

