"""The records a dispatcher has graded and not yet written, and the one wake-up its writer sleeps on.

The writer sleeps with no timer while nothing waits: an idle process does not wake for nothing
(each timer wake-up of an idle thread costs CPU; on a VM ~0.1-0.3 ms). The first record wakes
it; it then gives a batch up to `flush_interval` to fill, and a full batch goes at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

#: one graded job: its record (None: the job finished without one), its job id, whether to call back
Pending = tuple[Any, str | None, bool]


class PendingWrites:
    """A batch in the making. Touched only on the dispatcher's loop (`start` binds it there)."""

    def __init__(self, batch_size: int, flush_interval: float) -> None:
        self.batch_size, self.flush_interval = batch_size, flush_interval
        self.items: list[Pending] = []
        self._wakeup: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self.items)

    def start(self) -> None:
        """On the loop the writer runs on (again after a move to another loop)."""
        self._wakeup = asyncio.Event()

    def add(self, item: Pending) -> None:
        assert self._wakeup is not None
        self.items.append(item)
        if len(self.items) in (1, self.batch_size):  # the first wakes the writer; a full batch goes now
            self._wakeup.set()

    def take(self) -> list[Pending]:
        """The next batch (at most `batch_size`), oldest first."""
        batch, self.items = self.items[:self.batch_size], self.items[self.batch_size:]
        return batch

    async def gather(self) -> None:
        """Asleep, with no timer, until an item comes; then up to `flush_interval` for the batch to fill."""
        assert self._wakeup is not None
        await self._wakeup.wait()
        self._wakeup.clear()
        if len(self.items) < self.batch_size:
            with anyio.move_on_after(self.flush_interval):
                await self._wakeup.wait()
            self._wakeup.clear()

    def clear(self) -> None:
        self.items = []
