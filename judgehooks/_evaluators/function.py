"""`@evaluator`: a plain function of the run's snapshot, sync or async, as a full evaluator.

    @judgehooks.evaluator(name="short", threshold=0.5)
    def short(ctx):                        # bool, a score, a dict or an Outcome
        return 1.0 if len(ctx.output) < 200 else 0.0

A function may also name a ``session_state`` parameter, as an agno hook does: it gets a copy of the
run's session_state (also on ``ctx.session_state``), redacted like the rest of the run.

Sync functions run on a worker thread so they never block the judgehooks loop. Built from user
code: `judgehooks resume` needs ``--import`` with the module that defines it.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

import anyio.to_thread

from .._base.context import EvalContext
from .base import Evaluator


@dataclass(eq=False)
class FunctionEvaluator(Evaluator):
    """An evaluator whose `evaluate` is the wrapped function."""

    fn: Callable[..., Any]  # fn(ctx), or fn(ctx, session_state)
    _: KW_ONLY
    tool_calls: bool = True

    def __post_init__(self) -> None:
        fn = self.fn
        if not callable(fn):
            raise TypeError(f"evaluator needs a function taking the run's EvalContext, got {type(fn).__name__}")
        self._wants_state = False
        try:
            signature = inspect.signature(fn)
            self._wants_state = "session_state" in signature.parameters
            signature.bind(None, **({"session_state": {}} if self._wants_state else {}))
        except TypeError:
            raise TypeError(f"{getattr(fn, '__qualname__', fn)!r} must take exactly one argument, the run's "
                            "EvalContext (and, if it wants it, a `session_state` parameter)") from None
        except ValueError:  # no signature available (some builtins): let the call decide
            pass
        self.needs_tools = bool(self.tool_calls)  # type: ignore[misc]  # ClassVar set per instance
        self._fn_is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)
        self.__doc__ = fn.__doc__

    def default_name(self) -> str:
        return getattr(self.fn, "__name__", None) or type(self.fn).__name__

    async def evaluate(self, ctx: EvalContext) -> Any:
        fn: Callable[..., Any] = self.fn
        if self._wants_state:  # a copy: a function that changes it changes nothing another evaluator reads
            fn = functools.partial(fn, session_state=copy.deepcopy(dict(ctx.session_state)))
        if self._fn_is_async:
            return await fn(ctx)
        return await anyio.to_thread.run_sync(fn, ctx)


def evaluator(fn: Callable[[EvalContext], Any] | None = None, **settings: Any) -> Any:
    """Decorator: ``@evaluator`` or ``@evaluator(name=..., threshold=..., store=..., ...)`` turns
    ``fn(ctx) -> bool | float | dict | Outcome`` into an evaluator for ``post_hooks``. Settings are
    `Evaluator`'s (name, threshold, store, on_fail, run_in_background, sample_rate, ...) plus
    ``tool_calls=False`` to skip snapshotting tool calls the function does not read."""
    if fn is not None:
        return FunctionEvaluator(fn, **settings)
    return lambda f: FunctionEvaluator(f, **settings)
