"""Runtime: the one owner of judgehooks' process state.

- The judgehooks loop: one long-lived event loop on a daemon thread, reached through an anyio
  blocking portal. litellm and the OpenAI client cache HTTP clients per event loop and break
  across loops, so sync callers never `asyncio.run()` per evaluation: they hand coroutines here.
- Tracked work: inline grading from async callers and offline batches are futures `drain()` waits for.
- Registered drainables (background dispatchers), inline evaluators' counters (for `stats()`),
  spill waiters and closers (connection pools, judge processes, spill re-delivery). The runtime
  imports none of them: they register here.
- ONE `atexit` hook: drain with a deadline ($JUDGEHOOKS_EXIT_DRAIN_TIMEOUT, default 30 s), release
  the drainables (what is unfinished stays in the outbox), run the closers, stop the loop.
- After `os.fork()` the child has none of the parent's threads: its state is reset so its hooks
  start afresh (a gunicorn `--preload` worker, a multiprocessing child).
- Inside `judgehooks.lifespan()` drainables run on the application's loop instead (`home_loop`).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import ExitStack
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._base.log import log

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

T = TypeVar("T")


class Drainable(Protocol):
    """What registers for drain(), stats(), lifespan() and fork: a background dispatcher."""

    @property
    def name(self) -> str: ...

    def drain(self, timeout: float | None) -> bool: ...

    def stats(self) -> dict[str, Any]: ...

    def release(self) -> None: ...

    async def relocate(self, loop: asyncio.AbstractEventLoop) -> None: ...

    def reset_after_fork(self) -> None: ...


class Counted(Protocol):
    """What grades inline (no queue to drain) yet shows in `stats()`: an inline evaluator's shell."""

    def stats(self) -> dict[str, Any]: ...


#: a spill waiter: waits until its records are re-delivered or the deadline passes (False)
Waiter = Callable[[float | None], bool]


class Runtime:
    """Process-wide state of judgehooks. There is one: `judgehooks._runtime.runtime`."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._portal: BlockingPortal | None = None
        self._stack: ExitStack | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._app_loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._drainables: list[Drainable] = []
        self._counted: weakref.WeakSet[Any] = weakref.WeakSet()  # inline evaluators, while they live
        self._waiters: dict[int, weakref.WeakMethod[Waiter]] = {}
        self._closers: list[tuple[int, Callable[[], None]]] = []
        self._fork_resets: list[Callable[[], None]] = []
        self._orphans: list[Any] = []  # a forked child keeps the parent's portal referenced (see after_fork)
        self._exit_hook = False

    # ---- the judgehooks loop ----------------------------------------------------------------

    def portal(self) -> BlockingPortal:
        """The process-wide portal, started on first use."""
        if self._portal is None:
            from anyio.from_thread import start_blocking_portal

            with self._lock:
                if self._portal is None:
                    stack = ExitStack()
                    portal = stack.enter_context(start_blocking_portal(name="judgehooks-loop"))
                    self._stack = stack
                    self._loop = portal.call(asyncio.get_running_loop)
                    self._portal = portal
                    self._install_exit_hook()
        return self._portal

    def loop(self) -> asyncio.AbstractEventLoop:
        """The judgehooks loop itself (for thread-safe scheduling onto it)."""
        self.portal()
        assert self._loop is not None
        return self._loop

    def on_loop_thread(self) -> bool:
        """True on the judgehooks loop itself, where the portal cannot be called (it would wait on itself)."""
        try:
            return self._loop is not None and asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run an async function on the judgehooks loop and wait for its result (from a sync caller)."""
        return self.portal().call(fn, *args)

    async def on_loop(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Await `fn(*args)` on the judgehooks loop from any event loop: for resources that belong to
        one loop (a connection pool), so callers on short-lived loops (`anyio.run`) cannot strand them."""
        if self.on_loop_thread():
            return await fn(*args)
        return await asyncio.wrap_future(self.portal().start_task_soon(fn, *args))

    def home_loop(self) -> asyncio.AbstractEventLoop:
        """Where a dispatcher starting now should run: the app's loop inside `lifespan()`, else ours."""
        return self._app_loop if self._app_loop is not None else self.loop()

    def is_app_loop(self, loop: asyncio.AbstractEventLoop | None) -> bool:
        return loop is not None and loop is self._app_loop

    def host_on(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Make `loop` the home of background work (`lifespan()` enters), or ours again (None)."""
        with self._lock:
            if loop is not None and self._app_loop is not None:
                where = "this" if self._app_loop is loop else "another"
                raise RuntimeError(f"judgehooks.lifespan() is already active (on {where} event loop); "
                                   "enter it once per process")
            self._app_loop = loop

    # ---- tracked work -----------------------------------------------------------------------

    def submit(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> concurrent.futures.Future[Any]:
        """Start `fn(*args)` on the judgehooks loop without waiting for it; from any thread, the
        loop's own included (a callback starting a notifier's delivery). drain() waits for it."""
        if self.on_loop_thread():
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            task = asyncio.get_running_loop().create_task(fn(*args))
            self._tasks.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(partial(self._settle, future))
        else:
            future = self.portal().start_task_soon(fn, *args)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)
        return future

    def _settle(self, future: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
        """Mirror a task started on the judgehooks loop itself into the tracked future."""
        self._tasks.discard(task)
        if task.cancelled():
            future.cancel()
        elif task.exception() is not None:
            future.set_exception(task.exception())
        else:
            future.set_result(task.result())

    def _done(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)
        if not future.cancelled() and future.exception() is not None:
            error = future.exception()
            log.error("background_evaluation_failed", error_type=type(error).__name__, error=str(error))

    @staticmethod
    async def wait(future: concurrent.futures.Future[T]) -> T:
        """Await submitted work from another loop. Shielded: a cancelled run must not cancel a
        verdict that is already being paid for."""
        return await asyncio.shield(asyncio.wrap_future(future))

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    # ---- registration -----------------------------------------------------------------------

    def add_drainable(self, drainable: Drainable) -> None:
        with self._lock:
            self._drainables.append(drainable)
        self._install_exit_hook()

    def add_counted(self, source: Counted) -> None:
        """An inline evaluator's counters, in `stats()` for as long as the evaluator lives (held weakly)."""
        with self._lock:
            self._counted.add(source)

    def drainables(self) -> list[Drainable]:
        with self._lock:
            return list(self._drainables)

    def add_waiter(self, key: object, waiter: Waiter) -> None:
        """A spill: `drain()` waits for it to re-deliver. `waiter` is a bound method, held weakly
        (a store nobody holds is not waited for); `remove_waiter(key)` when it closes."""
        with self._lock:
            self._waiters[id(key)] = weakref.WeakMethod(waiter)

    def remove_waiter(self, key: object) -> None:
        with self._lock:
            self._waiters.pop(id(key), None)

    def add_closer(self, close: Callable[[], None], *, order: int = 0) -> None:
        """Run `close()` at exit after the drain, while the loop still runs (lower `order` first)."""
        with self._lock:
            self._closers.append((order, close))
        self._install_exit_hook()

    def remove_closer(self, close: Callable[[], None]) -> None:
        """Forget a closer that has already run (or is no longer needed)."""
        with self._lock:
            self._closers = [(order, fn) for order, fn in self._closers if fn != close]

    def on_fork(self, reset: Callable[[], None]) -> None:
        """Run `reset()` in a forked child (module state that holds the parent's threads)."""
        with self._lock:
            self._fork_resets.append(reset)

    # ---- drain and stats --------------------------------------------------------------------

    def drain(self, timeout: float | None = None, *, spills: bool = True) -> bool:
        """Wait until everything submitted is graded and stored; False if `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._drain_futures(deadline, timeout):
            return False
        for drainable in self.drainables():
            if not drainable.drain(_left(deadline)):
                log.warning("drain_timeout", evaluator=drainable.name,
                            queue_depth=drainable.stats().get("queue_depth"), timeout_s=timeout)
                return False
        if spills:
            with self._lock:
                waiters = [wait for ref in self._waiters.values() if (wait := ref()) is not None]
            return all(wait(_left(deadline)) for wait in waiters)
        return True

    def _drain_futures(self, deadline: float | None, timeout: float | None) -> bool:
        while True:
            with self._lock:
                waiting = list(self._pending)
            if not waiting:
                return True
            _, not_done = concurrent.futures.wait(waiting, timeout=_left(deadline))
            if not_done and deadline is not None and time.monotonic() >= deadline:
                log.warning("drain_timeout", pending=len(not_done), timeout_s=timeout)
                return False

    def stats(self) -> dict[str, dict[str, Any]]:
        found = {d.name: d.stats() for d in self.drainables()}
        with self._lock:
            counted: list[Counted] = list(self._counted)
        for source in counted:
            stats = source.stats()
            found.setdefault(stats["evaluator"], stats)
        return found

    # ---- exit and fork ----------------------------------------------------------------------

    def _install_exit_hook(self) -> None:
        with self._lock:
            if not self._exit_hook:
                atexit.register(self.shutdown)
                self._exit_hook = True

    def shutdown(self) -> None:
        """At interpreter exit: drain with a deadline, release, close, stop the loop. Safe to call twice."""
        timeout = float(os.environ.get("JUDGEHOOKS_EXIT_DRAIN_TIMEOUT", "30"))
        drainables = self.drainables()
        if self.pending() or drainables:
            log.info("drain_at_exit", pending=self.pending(), dispatchers=len(drainables), timeout_s=timeout)
            done = self.drain(timeout, spills=False)  # spilled records are on disk already: no wait at exit
            for drainable in drainables:
                try:
                    drainable.release()
                except Exception:
                    log.exception("release_at_exit_failed", evaluator=drainable.name)
            if not done:
                log.warning("drain_at_exit_incomplete", note="unfinished evaluations stay in the outbox")
        with self._lock:
            closers = sorted(self._closers, key=lambda item: item[0])
            self._closers = []
        for _, close in closers:
            try:
                close()
            except Exception:
                log.exception("close_at_exit_failed")
        self._stop_loop()

    def _stop_loop(self) -> None:
        with self._lock:
            stack, portal = self._stack, self._portal
            self._stack = self._portal = self._loop = None
        if stack is not None and portal is not None:
            try:
                # Dispatcher workers run until cancelled; the exit drain has already waited for work.
                portal.call(portal.stop, True)
            except RuntimeError:
                pass
            stack.close()

    def after_fork_in_child(self) -> None:
        # The parent's portal stays referenced: collecting it would run its shutdown code, which
        # waits on a loop thread that does not exist here.
        self._orphans.append((self._portal, self._stack))
        self._portal = self._stack = self._loop = None
        self._lock = threading.RLock()
        self._pending.clear()
        self._tasks.clear()
        for reset in list(self._fork_resets):
            reset()
        for drainable in self.drainables():
            drainable.reset_after_fork()


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


runtime = Runtime()
os.register_at_fork(after_in_child=runtime.after_fork_in_child)
