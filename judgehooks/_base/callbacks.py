"""User callbacks (on_fail, on_error), sync or async, wrapped once at construction."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, overload

import anyio.to_thread

from .log import log

Callback = Callable[[Any], Any]
AsyncCallback = Callable[[Any], Awaitable[None]]


@overload
def wrap_callback(name: str, fn: Callback) -> AsyncCallback: ...
@overload
def wrap_callback(name: str, fn: Callback | None) -> AsyncCallback | None: ...


def wrap_callback(name: str, fn: Callback | None) -> AsyncCallback | None:
    """Validate and wrap a callback: async ones are awaited, sync ones run on a worker thread so a
    slow alert cannot stall the grading loop. A callback that raises is logged with its traceback
    and changes nothing else."""
    if fn is None:
        return None
    if not callable(fn):
        raise TypeError(f"{name} must be a callable taking the EvalRecord (sync or async), got {type(fn).__name__}")
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)

    async def call(record: Any) -> None:
        try:
            if is_async:
                await fn(record)
            else:
                result = await anyio.to_thread.run_sync(fn, record)
                if inspect.isawaitable(result):
                    await result
        except Exception:
            log.exception("callback_failed", callback=name, record_id=record.id, evaluator=record.evaluator,
                          run_id=record.run_id)

    return call
