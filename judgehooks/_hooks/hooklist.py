"""Grading every run whichever of run()/arun() an agent used first.

agno normalises `post_hooks` once, on an agent's first run, into either sync or async callables.
After `arun()` first, a later `run()` skips the async hook with a warning; after `run()` first,
`arun()` calls the sync hook on its event loop. Our hooks therefore replace (never mutate) the
owner's normalised list with a `DualHookList` the first time they are called: its entries are the
sync hooks, and when the code iterating it is a coroutine or async generator (agno's async hook
executor) it hands out the async twins instead. Runs already in flight keep the list they read.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from functools import partial
from typing import Any

ASYNC_TWIN = "_judgehooks_async_twin"
_ASYNC_CODE = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_METHODS = ("post_check", "async_post_check")


class DualHookList(list[Any]):
    """A normalised agno hook list that serves sync or async hooks to whoever iterates it."""

    def __iter__(self) -> Iterator[Any]:
        caller = sys._getframe(1).f_code
        if caller.co_flags & _ASYNC_CODE:
            return iter([getattr(hook, ASYNC_TWIN, hook) for hook in list.__iter__(self)])
        return list.__iter__(self)


def _named(fn: Any) -> partial[Any]:
    from agno.hooks.decorator import HOOK_RUN_IN_BACKGROUND_ATTR

    wrapped = partial(fn)
    wrapped.__name__ = fn.__name__  # type: ignore[attr-defined]  # partials take attributes; typeshed omits it
    # We hand off to our own dispatcher; agno must always call us inline.
    setattr(wrapped, HOOK_RUN_IN_BACKGROUND_ATTR, False)
    return wrapped


#: the class attribute that marks judgehooks evaluators (set by `Evaluator`)
MARKER = "__judgehooks_hook__"


def dual_entry(hook: Any) -> Any:
    """The DualHookList entry for one normalised hook: ours become sync hooks with async twins."""
    method = getattr(hook, "func", None)
    target = getattr(method, "__self__", None)
    if target is None or not getattr(target, MARKER, False) or getattr(method, "__name__", None) not in _METHODS:
        return hook
    entry = _named(target.post_check)
    setattr(entry, ASYNC_TWIN, _named(target.async_post_check))
    return entry


def ensure_dual_hooks(owner: Any) -> None:
    """Swap `owner.post_hooks` for a DualHookList once agno has normalised it."""
    hooks = getattr(owner, "post_hooks", None)
    if not hooks or isinstance(hooks, DualHookList) or not getattr(owner, "_hooks_normalised", False):
        return
    owner.post_hooks = DualHookList(dual_entry(hook) for hook in list.__iter__(hooks))


def _read_by_agnos_normaliser() -> bool:
    """Whether the attribute being read is read by agno's `normalize_post_hooks`/`normalize_pre_hooks`
    (the frame two up: this helper, then the descriptor's __get__, then agno's code)."""
    frame = sys._getframe(2)
    return frame.f_code.co_name in ("normalize_post_hooks", "normalize_pre_hooks") \
        and frame.f_globals.get("__name__") == "agno.utils.hooks"


class RunInBackground:
    """An evaluator's ``run_in_background``, as agno's `BaseEval` field reads and assigns it, except
    that agno's hook normaliser reads it as False.

    agno turns a `BaseEval` with ``run_in_background=True`` into a hook that AgentOS runs as a
    FastAPI background task, after the response is sent (AgentOS normalises the hooks of a fresh
    copy of the agent on every request). Our hook only snapshots the run and hands it to our own
    durable queue, in about a millisecond; called after the response, that hand-off could be lost
    with the process, and `drain()` called on receiving the response could miss it. So agno always
    calls us inline, and "in the background" means our queue: the job is in the outbox before the
    response leaves."""

    def __get__(self, obj: Any, objtype: type[Any] | None = None) -> Any:
        if obj is None:
            return False  # the class default, as agno's field has it
        if _read_by_agnos_normaliser():
            return False
        shell = obj.__dict__.get("_shell")
        if shell is not None:
            return shell.settings.run_in_background
        return obj.__dict__.get("_run_in_background", False)

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__["_run_in_background"] = value  # until the hook's settings are built from it
