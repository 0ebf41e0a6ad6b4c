"""Opt-in: run the background dispatchers on the application's own event loop.

By default background grading lives on judgehooks' own loop thread, because the caller's loop may
close (`asyncio.run()` per request). A long-lived app (FastAPI, AgentOS, any asyncio server) can
instead host it for the life of the app:

    @asynccontextmanager
    async def app_lifespan(app):
        async with judgehooks.lifespan(drain_timeout=30):
            yield

Inside, every background evaluator's workers, store writes and callbacks run as tasks on the
app's loop (so async callbacks can use the app's loop-bound clients and pools); dispatchers that
started earlier move there with their queue. On exit the queue is drained (up to
`drain_timeout`), then the dispatchers move back to judgehooks' loop, where anything still queued
goes on being graded, or stays in the outbox for the next process.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from . import _portal
from ._log import log

_lock = threading.Lock()
_app_loop: asyncio.AbstractEventLoop | None = None


def home_loop() -> asyncio.AbstractEventLoop:
    """Where a dispatcher starting now should run: the app's loop inside `lifespan()`, else ours."""
    return _app_loop if _app_loop is not None else _portal.loop()


def is_app_loop(loop: asyncio.AbstractEventLoop | None) -> bool:
    return loop is not None and loop is _app_loop


@asynccontextmanager
async def lifespan(*, drain_timeout: float | None = 30.0) -> AsyncIterator[None]:
    """Host background grading on the running event loop until the block exits (then drain)."""
    from ._background import adrain
    from .dispatch._dispatcher import _registry

    if drain_timeout is not None and (isinstance(drain_timeout, bool) or not isinstance(drain_timeout, (int, float))
                                      or drain_timeout < 0):
        raise ValueError(f"drain_timeout must be a number >= 0 or None, got {drain_timeout!r}")
    global _app_loop
    loop = asyncio.get_running_loop()
    with _lock:
        if _app_loop is not None:
            raise RuntimeError("judgehooks.lifespan() is already active (on "
                               f"{'this' if _app_loop is loop else 'another'} event loop); enter it once per process")
        _app_loop = loop
    try:
        for dispatcher in _registry.all():
            await dispatcher.relocate(loop)
        log.info("lifespan_started", dispatchers=len(_registry.all()))
        yield
    finally:
        with anyio.CancelScope(shield=True):
            try:
                finished = await adrain(drain_timeout)
                if not finished:
                    log.warning("lifespan_drain_incomplete", timeout_s=drain_timeout,
                                note="unfinished evaluations go on on judgehooks' own loop, or stay in the outbox")
            finally:
                with _lock:
                    _app_loop = None
                home = _portal.loop()
                for dispatcher in _registry.all():
                    await dispatcher.relocate(home)
                log.info("lifespan_stopped")
