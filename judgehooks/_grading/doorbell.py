"""Wakes one idle worker per job, where an `asyncio.Event` would wake them all.

A dispatcher's workers (`max_concurrency` of them, 256 in the scale benchmark) wait for work
when the queue is empty. With an Event, every hand-off woke every idle worker; all but one found
the queue empty again and went back to sleep: a task step per idle worker per evaluation.
"""

from __future__ import annotations

import asyncio
import collections


class Doorbell:
    """`ring(n)` wakes up to `n` of the tasks waiting in `wait()`, longest waiting first. A ring with
    nobody waiting is not kept: a worker looks at the queue before it waits."""

    def __init__(self) -> None:
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def wait(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:  # cancelled: a ring that reached this waiter goes to the next one
            if waiter.done() and not waiter.cancelled():
                self.ring()
            raise
        finally:
            if not waiter.done():
                waiter.cancel()

    def ring(self, n: int = 1) -> None:
        while n > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                n -= 1
