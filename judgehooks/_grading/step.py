"""The one step of background work, and the one loop that claims windows of it.

Every kind of background work goes `claim -> Pipeline.grade -> Pipeline.deliver -> done`. The
dispatcher runs it batched for run jobs (`Pipeline.store_batch`, the job log's `done`, then
`Pipeline.notify`: the same order); `settle` is the one unbatched form, used by the session
clocks (local and Redis) and by the Redis worker's jobs. `Clock` is the one loop that claims due
session windows, here and in `judgehooks worker`, and runs each as a task.
"""

from __future__ import annotations

import asyncio
import functools
import traceback
from collections.abc import Awaitable, Callable, Collection, Coroutine
from typing import Any, Literal

from .._base.context import EvalContext
from .._base.log import log
from .._base.record import EvalRecord
from .outbox import Job
from .pipeline import Pipeline


class Requeue(Exception):
    """Raised by a step that cannot finish its job on this loop (the dispatcher is moving): the
    job goes back to the front of the queue, and the next loop runs it."""


#: The dispatcher's one seam: what is done with a job once a worker takes it. It returns the
#: record to store (grading), or None when the job needs no record here (publishing to Redis);
#: `moving()` is true while the workers move to another loop. The default step grades.
Step = Callable[[Job, EvalContext, Callable[[], bool]], Awaitable[EvalRecord | None]]

Settled = Literal["graded", "already_stored", "store_failed"]


async def settle(pipeline: Pipeline, record: EvalRecord | None, done: Callable[[], Awaitable[Any]],
                 back: Callable[[], Awaitable[Any]]) -> Settled:
    """After the claim and `Pipeline.grade`: deliver the record (store, callbacks, log), then `done`
    (forget the claimed work); if the store refused it, `back` (give the work back, for a later
    try). A None record is one the store holds already: forgotten, never called back again."""
    if record is None:
        await done()
        return "already_stored"
    if await pipeline.deliver([record]) is not None:
        await back()
        return "store_failed"
    await done()
    return "graded"


#: claims due work: (how many at most, keys being worked on, one key or None) -> (key, its work)
Claim = Callable[[int, Collection[str], "str | None"], Awaitable[list[tuple[str, Coroutine[Any, Any, Any]]]]]


class Clock:
    """Claims due work while there are free slots (`limit`), runs each piece as a task keyed by
    what it holds (a session), and sleeps between looks until woken or a piece ends."""

    def __init__(self, claim: Claim, limit: int) -> None:
        self._claim, self.limit = claim, limit
        self.running: dict[str, asyncio.Task[Any]] = {}
        self._event: asyncio.Event | None = None

    async def look(self, key: str | None = None) -> list[asyncio.Task[Any]]:
        """Claim what is due (of one key, even with no free slot; or as much as there are free
        slots) and start it. A key being worked on is never claimed: its work is in flight."""
        free = self.limit - len(self.running)
        if free <= 0 and key is None:
            return []
        started = []
        for name, work in await self._claim(max(free, 1), set(self.running), key):
            task = asyncio.get_running_loop().create_task(work)
            self.running[name] = task
            task.add_done_callback(functools.partial(self._ended, name))
            started.append(task)
        return started

    def _ended(self, key: str, task: asyncio.Task[Any]) -> None:
        self.running.pop(key, None)
        error = None if task.cancelled() else task.exception()
        if error is not None:  # a bug (a judge's or a store's trouble ends as a record): said, not lost in the task
            log.error("background_work_failed", key=key, error_type=type(error).__name__, error=str(error),
                      exception="".join(traceback.format_exception(error)))
        self.wake()  # a slot is free

    def wake(self) -> None:
        if self._event is not None:
            self._event.set()

    async def serve(self, between: Callable[[], Awaitable[float]], stop: asyncio.Event | None = None) -> None:
        """Until `stop`: `between()` (a look, and what else the caller does each round) says how
        long to sleep; a wake (or `stop`) ends the sleep early."""
        self._event = event = asyncio.Event()
        while stop is None or not stop.is_set():
            wait = await between()
            sleeps = [asyncio.ensure_future(e.wait()) for e in (event, stop) if e is not None]
            try:
                await asyncio.wait(sleeps, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for sleep in sleeps:
                    sleep.cancel()
            event.clear()

    async def finish(self, timeout: float) -> None:
        """Give the running pieces `timeout` seconds, then cancel the rest."""
        if left := list(self.running.values()):
            _, pending = await asyncio.wait(left, timeout=timeout)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
