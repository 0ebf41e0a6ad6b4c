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

`drain()` / `adrain()` / `stats()` are the public face of the runtime's drain and counters.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from .._base.log import log
from .._base.validate import check_finite
from .core import runtime


@asynccontextmanager
async def lifespan(*, drain_timeout: float | None = 30.0) -> AsyncIterator[None]:
    """Host background grading on the running event loop until the block exits (then drain)."""
    if drain_timeout is not None and (isinstance(drain_timeout, bool) or not isinstance(drain_timeout, (int, float))
                                      or drain_timeout < 0):
        raise ValueError(f"drain_timeout must be a number >= 0 or None, got {drain_timeout!r}")
    check_finite("drain_timeout", drain_timeout)
    loop = asyncio.get_running_loop()
    runtime.host_on(loop)
    try:
        for drainable in runtime.drainables():
            await drainable.relocate(loop)
        log.info("lifespan_started", dispatchers=len(runtime.drainables()))
        yield
    finally:
        with anyio.CancelScope(shield=True):
            try:
                finished = await adrain(drain_timeout)
                if not finished:
                    log.warning("lifespan_drain_incomplete", timeout_s=drain_timeout,
                                note="unfinished evaluations go on on judgehooks' own loop, or stay in the outbox")
            finally:
                runtime.host_on(None)
                home = runtime.loop()
                for drainable in runtime.drainables():
                    await drainable.relocate(home)
                log.info("lifespan_stopped")


def drain(timeout: float | None = None) -> bool:
    """Wait until every submitted evaluation is graded and stored; False if `timeout` passed first.

    What is not done by then is not lost: background jobs stay in the outbox, and records that
    wait for a store that is down stay in its spill."""
    return runtime.drain(timeout)


async def adrain(timeout: float | None = None) -> bool:
    """`drain` for async callers: waits without blocking the caller's event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, drain, timeout)


def stats() -> dict[str, dict[str, Any]]:
    """Counters per evaluator, by its name: for one grading in the background, queue depth, in
    flight, done, errors, dropped, retries, sampled out, resumed, age of the oldest pending job;
    for one grading inline (``"inline": True``), the same graded counts and sampling."""
    return runtime.stats()
