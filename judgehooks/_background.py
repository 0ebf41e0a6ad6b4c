"""Deferred grading on the judgehooks loop: the hook returns at once, the verdict lands later.

This is the in-process hand-off (not yet durable across a crash): pending evaluations are tracked
so `drain()` / `adrain()` and the interpreter-exit drain can wait for them.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
import time
from typing import Any, Awaitable, Callable

from . import _portal
from ._log import log

_lock = threading.Lock()
_pending: set[concurrent.futures.Future[Any]] = set()
_exit_hook_installed = False


def submit(fn: Callable[..., Awaitable[Any]], *args: Any) -> concurrent.futures.Future[Any]:
    """Start `fn(*args)` on the judgehooks loop without waiting for it."""
    global _exit_hook_installed
    future = _portal.get_portal().start_task_soon(fn, *args)
    with _lock:
        _pending.add(future)
        if not _exit_hook_installed:
            atexit.register(_drain_at_exit)  # after the portal's: atexit runs it first
            _exit_hook_installed = True
    future.add_done_callback(_done)
    return future


def _done(future: concurrent.futures.Future[Any]) -> None:
    with _lock:
        _pending.discard(future)
    if not future.cancelled() and future.exception() is not None:
        log.error("background_evaluation_failed", error_type=type(future.exception()).__name__,
                  error=str(future.exception()))


def pending() -> int:
    with _lock:
        return len(_pending)


def drain(timeout: float | None = None) -> bool:
    """Wait until every submitted evaluation is finished; False if `timeout` passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _lock:
            waiting = list(_pending)
        if not waiting:
            return True
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        _, not_done = concurrent.futures.wait(waiting, timeout=left)
        if not_done and deadline is not None and time.monotonic() >= deadline:
            log.warning("drain_timeout", pending=len(not_done), timeout_s=timeout)
            return False


async def adrain(timeout: float | None = None) -> bool:
    """`drain` for async callers: waits without blocking the caller's event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, drain, timeout)


def _drain_at_exit() -> None:
    timeout = float(os.environ.get("JUDGEHOOKS_EXIT_DRAIN_TIMEOUT", "30"))
    if pending():
        log.info("drain_at_exit", pending=pending(), timeout_s=timeout)
        drain(timeout)
