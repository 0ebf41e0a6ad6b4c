"""The one long-lived event loop that sync callers reach the async core through.

litellm and the OpenAI client cache HTTP clients per event loop and break across loops, so the
sync shell never calls `asyncio.run()` per evaluation: it hands coroutines to this loop, which
lives on a daemon thread for the life of the process.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

T = TypeVar("T")

_lock = threading.Lock()
_portal: BlockingPortal | None = None
_stack: ExitStack | None = None
_loop: asyncio.AbstractEventLoop | None = None


def get_portal() -> BlockingPortal:
    """The process-wide portal, started on first use."""
    global _portal, _stack, _loop
    if _portal is None:
        from anyio.from_thread import start_blocking_portal

        with _lock:
            if _portal is None:
                stack = ExitStack()
                portal = stack.enter_context(start_blocking_portal(name="judgehooks-loop"))
                _stack = stack
                _loop = portal.call(asyncio.get_running_loop)
                _portal = portal
                atexit.register(shutdown)
    return _portal


def loop() -> asyncio.AbstractEventLoop:
    """The judgehooks loop itself (for thread-safe scheduling onto it)."""
    get_portal()
    assert _loop is not None
    return _loop


def on_loop_thread() -> bool:
    """True when running on the judgehooks loop itself, where the portal cannot be called (it would wait on itself)."""
    try:
        return _loop is not None and asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False


def call(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run an async function on the judgehooks loop and wait for its result (from a sync caller)."""
    return get_portal().call(fn, *args)


def shutdown() -> None:
    """Stop the loop thread. Runs at interpreter exit; safe to call twice."""
    global _portal, _stack, _loop
    with _lock:
        stack, portal, _stack, _portal, _loop = _stack, _portal, None, None, None
    if stack is not None and portal is not None:
        try:
            # Dispatcher workers run until cancelled; the exit drain has already waited for work.
            portal.call(portal.stop, True)
        except RuntimeError:
            pass
        stack.close()
