"""Whether the grading under way was asked for by a sync caller (`run()`, agno's sync post hook).

agno's `AgentAsJudgeEval` calls its evaluator agent's `run` from its own `run()` and the agent's
`arun` from `arun()`, and agno users' tests mock the one their caller uses. judgehooks grades on its
own event loop either way, so the hook shell marks the grading a sync caller asked for, and the
agno judge calls the method agno would have called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from functools import wraps
from typing import ParamSpec, TypeVar

_SYNC: ContextVar[bool] = ContextVar("judgehooks_sync_caller", default=False)

P = ParamSpec("P")
T = TypeVar("T")


def sync_caller() -> bool:
    """True inside grading a sync caller asked for (and the tasks it starts)."""
    return _SYNC.get()


def as_sync_caller(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """`fn`, marked as asked for by a sync caller while it runs (on the judgehooks loop)."""

    @wraps(fn)
    async def marked(*args: P.args, **kwargs: P.kwargs) -> T:
        token = _SYNC.set(True)
        try:
            return await fn(*args, **kwargs)
        finally:
            _SYNC.reset(token)

    return marked
