"""Redis commands that a cancellation cannot interrupt half way.

On Python 3.11, cancelling a task while redis-py is in the middle of a command can lose the
cancellation: `asyncio.wait_for` (which redis-py uses to connect and to send) returns normally when
the cancellation and the inner step finish in the same loop iteration, and the command then waits for
a reply with no deadline. A `judgehooks worker` told to stop then never stopped (reproduced on 3.11 in
about one cancelled read in fifty; never on 3.13). So the code that is cancelled at shutdown (the
stream reader, the keep-alive, a session lease's renewal) runs each round of commands as a task of
its own and waits for it through `asyncio.shield`: the cancellation reaches the waiter at once, and the
round ends on its own, bounded by XREADGROUP's BLOCK and the connection's socket timeout. What such an
orphaned round read stays pending in the consumer group, so a live worker reclaims it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

_orphans: set[asyncio.Task[Any]] = set()  # rounds whose waiter was cancelled: kept until they end


def _settle(task: asyncio.Task[Any]) -> None:
    _orphans.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: an orphan's error (Redis gone at shutdown) is expected, not news


async def detached(commands: Awaitable[T]) -> T:
    """Await `commands` run as a task of their own that this caller's cancellation never enters."""
    task = asyncio.ensure_future(commands)
    _orphans.add(task)
    task.add_done_callback(_settle)
    return await asyncio.shield(task)
