"""Every place judgehooks works around agno's internals, in one room (agno 3.1.10).

Each workaround names the agno behaviour it answers and the agno code that has it; each has a
test in ``tests/hooks/test_agno_workarounds.py`` that fails when agno changes that behaviour, so
the workaround can go (or change) with it:

1. `DualHookList`: agno fixes a hook's sync/async form on an agent's first run.
2. `AGNO_SCHEDULES_US`: agno's hook normaliser reads a `BaseEval`'s ``run_in_background`` to decide
   whether AgentOS runs it after the response.
3. `fold_judge_usage`: agno's own evaluator folds the judge's usage into the judged run's metrics.
4. `SharedAcrossCopies`: agno deep-copies an agent's hooks with the agent.
5. `AGNO_ASSIGNED`: agno's users assign its evaluator's fields after construction.
6. `Evaluator.__call__`: agno's `continue_run` calls the hooks it was given without normalising them.
7. `install_step_names`: agno names a workflow step on its output only after the step's agent ran
   (and its post hooks with it), so the step's name rides in a context variable set around
   `Step.execute` (read by `_hooks/workflow.py`).

The one frame read left (`DualHookList.__iter__`) has no alternative; ``docs/design.md`` ("What
judgehooks works around in agno") says why, as a request agno could take upstream.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial
from typing import Any

from .._base.record import EvalRecord, split_model

# ---- 1. the sync/async form agno fixes on the first run --------------------------------------------
# agno 3.1.10, agent/_run.py and team/_run.py: `if not agent._hooks_normalised: agent.post_hooks =
# normalize_post_hooks(agent.post_hooks, async_mode=...)` runs on the FIRST run only, turning each
# BaseEval into `partial(ev.post_check)` or `partial(ev.async_post_check)` for good. After `arun()`
# first, `run()` skips the async hook with a warning (agent/_hooks.py `execute_post_hooks`: "Async
# hook ... cannot be used with sync run()"); after `run()` first, `arun()` calls the sync hook on its
# event loop, blocking it for the whole inline grading. Our hooks therefore replace (never mutate:
# runs in flight keep the list they read) the owner's normalised list, the first time they are
# called, with a `DualHookList`: its entries are the sync hooks, and when the code iterating it is a
# coroutine or async generator (agno's `aexecute_post_hooks`) it hands out the async twins instead.

ASYNC_TWIN = "_judgehooks_async_twin"
_ASYNC_CODE = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_METHODS = ("post_check", "async_post_check")

#: the class attribute that marks judgehooks evaluators (set by `Evaluator`)
MARKER = "__judgehooks_hook__"


class DualHookList(list[Any]):
    """A normalised agno hook list that serves sync or async hooks to whoever iterates it.

    The one frame read judgehooks keeps: agno's sync and async executors iterate the same list
    object, call what they get, and tell the two forms apart only by `iscoroutinefunction`, so the
    iterating code is the only thing that says which form this iteration needs (a running event
    loop does not: a sync `run()` may be called on a loop's thread, and needs the sync form)."""

    def __iter__(self) -> Iterator[Any]:
        caller = sys._getframe(1).f_code
        if caller.co_flags & _ASYNC_CODE:
            return iter([getattr(hook, ASYNC_TWIN, hook) for hook in list.__iter__(self)])
        return list.__iter__(self)


def _inline(fn: Any) -> partial[Any]:
    """A hook agno always calls inline (see `AGNO_SCHEDULES_US`), named as agno's normaliser names it."""
    from agno.hooks.decorator import HOOK_RUN_IN_BACKGROUND_ATTR

    wrapped = partial(fn)
    wrapped.__name__ = fn.__name__  # type: ignore[attr-defined]  # partials take attributes; typeshed omits it
    setattr(wrapped, HOOK_RUN_IN_BACKGROUND_ATTR, AGNO_SCHEDULES_US)
    return wrapped


def dual_entry(hook: Any) -> Any:
    """The DualHookList entry for one normalised hook: ours become sync hooks with async twins."""
    method = getattr(hook, "func", None)
    target = getattr(method, "__self__", None)
    if target is None or not getattr(target, MARKER, False) or getattr(method, "__name__", None) not in _METHODS:
        return hook
    entry = _inline(target.post_check)
    setattr(entry, ASYNC_TWIN, _inline(target.async_post_check))
    return entry


def ensure_dual_hooks(owner: Any) -> None:
    """Swap `owner.post_hooks` for a DualHookList once agno has normalised it (`_hooks_normalised`)."""
    hooks = getattr(owner, "post_hooks", None)
    if not hooks or isinstance(hooks, DualHookList) or not getattr(owner, "_hooks_normalised", False):
        return
    owner.post_hooks = DualHookList(dual_entry(hook) for hook in list.__iter__(hooks))


# ---- 2. run_in_background as agno's normaliser and AgentOS read it ---------------------------------
# agno 3.1.10, utils/hooks.py `normalize_post_hooks`: `setattr(wrapped, HOOK_RUN_IN_BACKGROUND_ATTR,
# getattr(hook, "run_in_background", False))`; agent/_hooks.py `execute_post_hooks` then gives such a
# hook to FastAPI's `background_tasks` (AgentOS passes them), run after the response is sent. The
# normaliser is the only reader of a BaseEval's `run_in_background` in agno. Our hook only snapshots
# the run and hands it to our own durable queue, in about a millisecond; run after the response, that
# hand-off could be lost with the process, and `drain()` called on receiving the response could miss
# it. So our evaluators answer agno's question with False, to every reader: agno always calls them
# inline, and "in the background" means our queue (the job is in the outbox before the response
# leaves). Whether an evaluator grades in the background is `hook_settings.run_in_background`.

#: what a judgehooks evaluator's ``run_in_background`` attribute reads (`fields.DeploymentField`);
#: assigning it still turns our background grading on or off: agno never schedules our hooks
AGNO_SCHEDULES_US = False


# ---- 3. the judge's usage folded into the judged run -----------------------------------------------
# agno 3.1.10, eval/agent_as_judge.py: after judging, agno calls `agno.metrics.accumulate_eval_metrics`
# with the judge agent's metrics and the judged run's: the judge's tokens and cost join the run's
# totals, its model appears under ``details["eval_model"]`` and its time under
# ``additional_metrics["eval_duration"]``. Inline grading does the same from the record; background
# grading cannot (the run has returned), and the record carries the usage instead.


def judge_metrics(record: EvalRecord) -> Any:
    """The judge's usage for one record as agno `RunMetrics`, or None when no model was asked."""
    if not record.judge_model or record.attempts == 0:
        return None
    from agno.metrics import ModelMetrics, RunMetrics

    provider, model_id = split_model(record.judge_model)
    tokens_in, tokens_out = record.prompt_tokens or 0, record.completion_tokens or 0
    model = ModelMetrics(id=model_id, provider=provider, input_tokens=tokens_in, output_tokens=tokens_out,
                         total_tokens=tokens_in + tokens_out, cost=record.cost_usd)
    return RunMetrics(input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out,
                      cost=record.cost_usd, details={"model": [model]},
                      duration=None if record.latency_ms is None else record.latency_ms / 1000)


def fold_judge_usage(record: EvalRecord | None, run_metrics: Any) -> None:
    """Add the judge's usage behind `record` to `run_metrics` (a judged run's, or one a caller of
    ``run(run_metrics=...)`` passed), exactly as agno's evaluator does."""
    if record is None or run_metrics is None or not hasattr(run_metrics, "details"):
        return  # nothing to fold into (a whole workflow run's `WorkflowMetrics` keeps no model usage)
    metrics = judge_metrics(record)
    if metrics is not None:
        from agno.metrics import accumulate_eval_metrics

        accumulate_eval_metrics(metrics, run_metrics)


# ---- 4. hooks copied with the agent ----------------------------------------------------------------
# agno 3.1.10, agent/_utils.py `deep_copy_field`: `Agent.deep_copy()` deep-copies list fields, hooks
# included, and AgentOS makes such a copy of the agent for every request (os/utils.py `get_agent_by_id`,
# ``create_fresh=True``). An evaluator is shared configuration with shared resources (its store, queue,
# judge processes, counters): every copy is the evaluator itself.


class SharedAcrossCopies:
    """`copy.copy` and `copy.deepcopy` return the object itself (agno deep-copies hooks per request)."""

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self


# ---- 5. agno's fields assigned after construction --------------------------------------------------
# agno 3.1.10, eval/agent_as_judge.py: `AgentAsJudgeEval` is a plain dataclass and reads its fields at
# every run, so agno's users (its tests, its cookbook: AgentOS's background_evals_example.py sets
# `run_in_background = True` after construction) assign them. The deployment settings among those
# fields stay assignable on every judgehooks evaluator, each assignment going through
# `Evaluator.configure`; our other deployment settings are changed with `configure` only.

#: the deployment settings that are agno `AgentAsJudgeEval` fields: assignable as agno's users assign them
AGNO_ASSIGNED = frozenset({"on_fail", "print_summary", "print_results", "file_path_to_save_results", "db",
                           "run_in_background"})


# ---- 6. continue_run without the normaliser --------------------------------------------------------
# agno 3.1.10, agent/_run.py `continue_run_dispatch` / `acontinue_run_dispatch` (team/_run.py the same)
# never run `normalize_post_hooks`: only `run`/`arun` do, on the first run (item 1). An agent or team
# whose first call is `continue_run` (AgentOS resuming a paused run by id after a restart, on an
# instance that has not run yet) calls each post hook as it stands in the list: agno's own
# `AgentAsJudgeEval` there is not callable, so agno logs a TypeError and the resumed run is never
# graded. Our evaluators are callable (`Evaluator.__call__`, the sync `post_check`): the resumed run
# is graded. In `acontinue_run` that sync hook runs on the caller's loop, as in item 1 after `run()`.


# ---- 7. the workflow step, named while it runs ------------------------------------------------------
# agno 3.1.10, workflow/step.py `Step.execute` (and `aexecute`, `execute_stream`, `aexecute_stream`):
# the step runs its agent with the workflow's `run_context` (workflow id and name, the workflow run's
# id) and names the step on the agent's output (`workflow_step_id`, in `_store_executor_response`)
# only after `agent.run()` returned: the post hooks never see which step ran them. Each of the four
# is wrapped once to set `STEP` (the step's name and id) while it runs; a parallel step's thread
# copies the context, so each sees its own.

#: the step running now (its name, its id), set by the wrapped `Step.execute` and its forms
STEP: contextvars.ContextVar[tuple[str | None, str | None] | None] = contextvars.ContextVar(
    "judgehooks_workflow_step", default=None)
_WRAPPED = "__judgehooks_step__"


def install_step_names() -> bool:
    """Wrap agno's `Step` once, when agno's workflows are imported (they are imported with the
    Workflow the application builds): True when the step is named from now on."""
    module = sys.modules.get("agno.workflow.step")
    step = getattr(module, "Step", None)
    if step is None:
        return False
    if getattr(step, _WRAPPED, False):
        return True
    for name, wrap in (("execute", _plain), ("aexecute", _awaited), ("execute_stream", _streamed),
                       ("aexecute_stream", _astreamed)):
        method = getattr(step, name, None)
        if callable(method):
            setattr(step, name, functools.wraps(method)(wrap(method)))
    setattr(step, _WRAPPED, True)
    return True


def _named(step: Any) -> tuple[str | None, str | None]:
    name, ident = getattr(step, "name", None), getattr(step, "step_id", None)
    return (name if isinstance(name, str) else None, ident if isinstance(ident, str) else None)


def _reset(token: contextvars.Token[Any], before: Any) -> None:
    try:
        STEP.reset(token)
    except ValueError:  # a stream closed from another context (e.g. collected later): put it back there
        STEP.set(before)


def _plain(method: Callable[..., Any]) -> Callable[..., Any]:
    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = STEP.get()
        token = STEP.set(_named(self))
        try:
            return method(self, *args, **kwargs)
        finally:
            _reset(token, before)
    return execute


def _awaited(method: Callable[..., Any]) -> Callable[..., Any]:
    async def aexecute(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = STEP.get()
        token = STEP.set(_named(self))
        try:
            return await method(self, *args, **kwargs)
        finally:
            _reset(token, before)
    return aexecute


def _streamed(method: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    def execute_stream(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        before = STEP.get()
        token = STEP.set(_named(self))
        try:
            yield from method(self, *args, **kwargs)
        finally:
            _reset(token, before)
    return execute_stream


def _astreamed(method: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    async def aexecute_stream(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        before = STEP.get()
        token = STEP.set(_named(self))
        try:
            async for event in method(self, *args, **kwargs):
                yield event
        finally:
            _reset(token, before)
    return aexecute_stream
