"""Small task helpers: tasks kept alive until they end, and awaiting on another loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar


def safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:
        return None


_tasks: set[asyncio.Task[Any]] = set()


def spawn(coro: Awaitable[Any]) -> None:
    """Start a task on the running loop and keep a reference until it ends."""
    task = asyncio.ensure_future(coro)
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def current_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


T = TypeVar("T")


async def run_on(loop: asyncio.AbstractEventLoop, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Await `fn()` on `loop`, from a coroutine on any loop."""
    if current_loop() is loop:
        return await fn()
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(fn(), loop))
