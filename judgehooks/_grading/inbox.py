"""Jobs handed off from the callers' threads to the event loop the workers run on.

A hand-off through `loop.call_soon_threadsafe` is a system call on the caller's thread (it writes
to the loop's wake-up socket) and a wake-up of the loop, per job. The inbox gathers the jobs: the
first job of an empty inbox wakes the loop, and the jobs handed off before the loop gets to it
ride along, all taken in one callback. Under a burst (many runs ending at once, from many threads)
that is one wake-up for the burst.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from .._base.log import log


class Inbox:
    """`put(item)` from any thread; `accept(*item)` runs on the loop `loop()` names, for each item in order."""

    def __init__(self, lock: threading.Lock, loop: Callable[[], asyncio.AbstractEventLoop | None],
                 accept: Callable[..., None]) -> None:
        self._lock = lock  # the dispatcher's: a relocation never falls between reading the loop and scheduling on it
        self._loop = loop
        self._accept = accept
        self._items: list[tuple[Any, ...]] = []

    def put(self, item: tuple[Any, ...]) -> None:
        with self._lock:
            self._items.append(item)
            if len(self._items) == 1:
                loop = self._loop()
                assert loop is not None
                try:
                    loop.call_soon_threadsafe(self.take)
                except BaseException:  # a closed loop: this job was not handed off, and the next one tries again
                    self._items.pop()
                    raise

    def moved(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop changed (the caller holds the lock): a wake-up sent to the old one may never run there."""
        if self._items:
            loop.call_soon_threadsafe(self.take)

    def take(self) -> None:
        with self._lock:
            items, self._items = self._items, []
        for item in items:  # one item's failure (a bug) is its own, as with a callback each
            try:
                self._accept(*item)
            except Exception:
                log.exception("background_handoff_failed")
