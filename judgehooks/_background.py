"""Work handed to the judgehooks loop, and the process-wide drain() / adrain() / stats().

Inline grading from async callers and offline batches are tracked futures; background grading
lives in dispatchers (judgehooks.dispatch). `drain` waits for both; at interpreter exit it runs with
a deadline ($JUDGEHOOKS_EXIT_DRAIN_TIMEOUT, default 30 s), and whatever is unfinished stays in
the outbox for the next process.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from . import _portal
from ._log import log

_lock = threading.Lock()
_pending: set[concurrent.futures.Future[Any]] = set()
_tasks: set[asyncio.Task[Any]] = set()
_exit_hook_installed = False
_closers: list[Callable[[], None]] = []


def submit(fn: Callable[..., Awaitable[Any]], *args: Any) -> concurrent.futures.Future[Any]:
    """Start `fn(*args)` on the judgehooks loop without waiting for it; from any thread, the loop's
    own included (a callback starting a notifier's delivery). drain() waits for it."""
    if _portal.on_loop_thread():
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        task = asyncio.get_running_loop().create_task(fn(*args))
        _tasks.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(partial(_settle, future))
    else:
        future = _portal.get_portal().start_task_soon(fn, *args)
    with _lock:
        _pending.add(future)
    install_exit_drain()
    future.add_done_callback(_done)
    return future


def _settle(future: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
    """Mirror a task started on the judgehooks loop itself into the tracked future."""
    _tasks.discard(task)
    if task.cancelled():
        future.cancel()
    elif task.exception() is not None:
        future.set_exception(task.exception())  # type: ignore[arg-type]
    else:
        future.set_result(task.result())


async def wait(future: concurrent.futures.Future[Any]) -> Any:
    """Await a submitted evaluation from another loop. Shielded: a cancelled run must not cancel a
    verdict that is already being paid for."""
    return await asyncio.shield(asyncio.wrap_future(future))


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
    """Wait until every submitted evaluation is graded and stored; False if `timeout` passed first.

    What is not done by then is not lost: background jobs stay in the outbox, and records that
    wait for a store that is down stay in its spill."""
    return _drain(timeout, spills=True)


def _drain(timeout: float | None, *, spills: bool) -> bool:
    from .dispatch._dispatcher import _registry
    from .stores._spill import wait_for_spills

    deadline = None if timeout is None else time.monotonic() + timeout
    if not _drain_futures(deadline, timeout):
        return False
    for dispatcher in _registry.all():
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not dispatcher.drain(left):
            log.warning("drain_timeout", evaluator=dispatcher.pipeline.name,
                        queue_depth=dispatcher.stats()["queue_depth"], timeout_s=timeout)
            return False
    return not spills or wait_for_spills(deadline)


def stats() -> dict[str, dict[str, Any]]:
    """Counters per background evaluator: queue depth, in flight, done, errors, dropped, retries,
    sampled out, resumed, age of the oldest pending job."""
    from .dispatch._dispatcher import _registry

    return {d.pipeline.name: d.stats() for d in _registry.all()}


def _drain_futures(deadline: float | None, timeout: float | None) -> bool:
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
    from .dispatch._dispatcher import _registry

    timeout = float(os.environ.get("JUDGEHOOKS_EXIT_DRAIN_TIMEOUT", "30"))
    dispatchers = _registry.all()
    if pending() or dispatchers:
        log.info("drain_at_exit", pending=pending(), dispatchers=len(dispatchers), timeout_s=timeout)
        done = _drain(timeout, spills=False)  # spilled records are on disk already: no wait at exit
        for dispatcher in dispatchers:
            if dispatcher.outbox is not None:
                try:
                    dispatcher.outbox.release()
                except Exception:
                    log.exception("outbox_release_failed", outbox=dispatcher.outbox.path)
        if not done:
            log.warning("drain_at_exit_incomplete", note="unfinished evaluations stay in the outbox")
    for close in list(_closers):  # after the drain, while the loop still runs: connection pools
        try:
            close()
        except Exception:
            log.exception("close_at_exit_failed")
    from ._judgeproc import close_all

    close_all()


def close_at_exit(fn: Callable[[], None]) -> None:
    """Run `fn` at exit after the exit drain, before the judgehooks loop stops."""
    with _lock:
        _closers.append(fn)
    install_exit_drain()


def install_exit_drain() -> None:
    """Register the exit drain once, after the portal's own exit hook (atexit runs it first)."""
    global _exit_hook_installed
    with _lock:
        if not _exit_hook_installed:
            atexit.register(_drain_at_exit)
            _exit_hook_installed = True
