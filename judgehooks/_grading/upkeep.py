"""The outbox upkeep a background dispatcher runs beside its workers, once a second: fold this
process's journal into the outbox (the file being written once it is due, `journal.FOLD_AGE_S`,
or when the dispatcher has nothing queued, in flight or to store and no job was put for a moment), claim
the jobs of processes that died, beat this process's heart, checkpoint the WAL (and truncate it
once it outgrows its limit)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread

from .._base.log import log
from .outbox import Job, Outbox


async def upkeep(outbox: Outbox, evaluator: str, room: Callable[[], int], take: Callable[[list[Job]], Awaitable[None]],
                 settled: Callable[[], None], busy: Callable[[], bool]) -> None:
    """Forever: claim up to `room()` of `evaluator`'s orphaned jobs and `take` them; else heartbeat
    and checkpoint. `settled()` after every round (the first one tells the dispatcher it has looked).
    While `busy()` (jobs queued, in flight or not yet stored), the journal file being written is folded only once due:
    most of its jobs finish first, and never reach SQLite. Idle, it is folded once no job was put
    for a moment (one put a moment ago may not have reached the queue yet)."""
    beat = max(1.0, outbox.stale_after / 3)
    next_beat = [0.0]

    def one_round(free: int, idle: bool) -> list[Job]:  # one trip to a worker thread a round
        try:
            outbox.fold(due=True, idle=idle)
            jobs = outbox.claim([evaluator], free) if free > 0 else []
            if not jobs:
                outbox.checkpoint()
            return jobs
        finally:  # whatever failed above: a process that stops beating is taken for dead
            if time.monotonic() >= next_beat[0]:
                outbox.heartbeat()
                next_beat[0] = time.monotonic() + beat

    while True:
        try:
            jobs = await anyio.to_thread.run_sync(one_round, room(), not busy())
            if jobs:
                await take(jobs)
                log.info("outbox_resumed", evaluator=evaluator, jobs=len(jobs))
                continue
        except Exception:
            log.exception("outbox_maintenance_failed", outbox=outbox.path)
        settled()
        await anyio.sleep(1.0)
