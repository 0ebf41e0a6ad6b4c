"""The standard machinery a dispatcher runs on: the one count of unfinished work, its job queue, and
the batches its writer takes.

`Unfinished` is `asyncio.Queue`'s unfinished-task count, readable from any thread: one is added when
a job is accepted (on the caller's thread, before the hand-off) and removed once its record is
stored and called back. `wait` is `Queue.join` with a timeout, for `drain()` on any thread. It is
the only idle signal: a new kind of in-flight work adds and removes its one, and nothing else changes.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Literal, TypeVar

import anyio

Overload = Literal["block", "drop_newest", "drop_oldest"]
OVERLOAD_POLICIES: tuple[str, ...] = ("block", "drop_newest", "drop_oldest")
T = TypeVar("T")


def overloaded(policy: str, full: bool, holds_slot: bool, block_timeout: float) -> str | None:
    """Why a job handed off is shed by the overload policy (None: it is queued). `drop_oldest`
    queues it and sheds the oldest instead."""
    if policy == "block" and not holds_slot:
        return f"queue full: no room within {block_timeout:g}s (block)"
    if policy == "drop_newest" and full:
        return "queue full: newest dropped (drop_newest)"
    return None


class Unfinished:
    """Jobs accepted and not yet finished. Thread-safe; `wait` never needs an event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._idle = threading.Event()
        self._idle.set()

    def __int__(self) -> int:
        return self._count

    def add(self, n: int = 1) -> None:
        with self._lock:
            self._count += n
            if self._count:
                self._idle.clear()

    def done(self, n: int = 1) -> None:
        with self._lock:
            self._count -= n
            if self._count < 0:  # a bug, said at once rather than a drain() that returns early later
                self._count = 0
                raise ValueError("Unfinished.done() called more times than add()")
            if not self._count:
                self._idle.set()

    def wait(self, timeout: float | None) -> bool:
        """Until nothing is unfinished (True), or `timeout` seconds (False)."""
        return self._idle.wait(timeout)


class JobQueue(asyncio.Queue[Any]):
    """An unbounded `asyncio.Queue` (each put wakes one waiting worker) that can also take an item back
    at its front: a job a step could not finish on this loop goes first on the next one."""

    _queue: collections.deque[Any]

    def _init(self, maxsize: int) -> None:  # the hooks asyncio.Queue's own subclasses override
        self._queue = collections.deque()
        self._front = False

    def _put(self, item: Any) -> None:
        if self._front:
            self._queue.appendleft(item)
        else:
            self._queue.append(item)

    def put_front(self, item: Any) -> None:
        self._front = True
        try:
            self.put_nowait(item)
        finally:
            self._front = False

    def moved(self) -> JobQueue:
        """A new queue holding these items in order, for another event loop (a queue binds to the
        loop its first waiter runs on)."""
        fresh = JobQueue()
        for item in self._queue:
            fresh.put_nowait(item)
        return fresh


async def next_batch(queue: asyncio.Queue[T], size: int, wait_s: float) -> list[T]:
    """The next batch from `queue`: asleep with no timer until an item comes, then up to `wait_s`
    seconds for more (at most `size`)."""
    batch = [await queue.get()]
    with anyio.move_on_after(wait_s):
        while len(batch) < size:
            batch.append(await queue.get())
    return batch
