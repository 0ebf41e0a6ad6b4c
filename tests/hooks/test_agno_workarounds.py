"""The agno behaviours `judgehooks._hooks.agno_compat` works around, pinned on agno's own code.

Each test asserts what agno does today (agno 3.1.10) with agno's own objects or a plain `BaseEval`
of ours that has no workaround, then, where there is one, that judgehooks' evaluator is still
served. When an agno release changes a behaviour, its test fails here and names the workaround
that can go or must change.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agno.eval.base import BaseEval

import judgehooks
from judgehooks._hooks import agno_compat


class PlainEval(BaseEval):
    """A BaseEval with none of judgehooks' workarounds: what agno does to any eval hook."""

    run_in_background = False

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pre_check(self, run_input: Any) -> None: ...

    async def async_pre_check(self, run_input: Any) -> None: ...

    def post_check(self, run_output: Any) -> None:
        self.calls.append("sync")

    async def async_post_check(self, run_output: Any) -> None:
        self.calls.append("async")


# ---- 1. DualHookList -----------------------------------------------------------------------------


def test_agno_fixes_the_hook_form_on_the_first_run(make_agent, caplog):
    """agno normalises post_hooks once: after arun() first, run() skips the async form with a
    warning; after run() first, arun() calls the sync form. (`DualHookList` answers this.)"""
    async_first, sync_first = PlainEval(), PlainEval()
    agent = make_agent(async_first)
    asyncio.run(agent.arun("first"))
    with caplog.at_level(logging.WARNING):
        agent.run("second")
    assert async_first.calls == ["async"]  # the sync run graded nothing
    other = make_agent(sync_first)
    other.run("first")
    asyncio.run(other.arun("second"))
    assert sync_first.calls == ["sync", "sync"]  # the async run called the sync hook on its loop


def test_agnos_executors_iterate_the_hook_list_in_their_own_frames(make_agent):
    """What `DualHookList.__iter__` reads: the code iterating it is agno's sync executor (a plain
    generator) or its async one (an async generator), nothing in between."""
    seen: list[tuple[str, bool]] = []

    class Recording(list[Any]):
        def __iter__(self) -> Any:
            import sys

            code = sys._getframe(1).f_code
            seen.append((code.co_name, bool(code.co_flags & agno_compat._ASYNC_CODE)))
            return list.__iter__(self)

    agent = make_agent(PlainEval())
    agent.run("normalise")
    agent.post_hooks = Recording(agent.post_hooks)
    agent.run("sync")
    asyncio.run(agent.arun("async"))
    assert ("execute_post_hooks", False) in seen and ("aexecute_post_hooks", True) in seen


def test_our_hooks_are_served_in_either_order(make_judge, make_agent, store):
    """The workaround: both orders grade every run, in the form each run needs."""
    judge = make_judge()
    agent = make_agent(judge)
    asyncio.run(agent.arun("first"))
    agent.run("second")
    assert isinstance(agent.post_hooks, agno_compat.DualHookList)
    assert sorted(r.input for r in store.records) == ["first", "second"]


# ---- 2. run_in_background as agno's normaliser reads it ------------------------------------------


def test_agno_schedules_a_run_in_background_eval_as_a_background_task(make_agent, make_judge, store, tmp_path):
    """agno's normaliser copies a BaseEval's `run_in_background` onto its hook, and the executor
    hands such a hook to the `background_tasks` it was given (AgentOS passes FastAPI's), to run
    after the response. Ours are called inline: the job is queued before the run returns."""
    from fastapi import BackgroundTasks

    theirs = PlainEval()
    theirs.run_in_background = True
    ours = make_judge(run_in_background=True, outbox=str(tmp_path / "o.db"))
    tasks = BackgroundTasks()
    make_agent(theirs, ours).run("q", background_tasks=tasks)
    assert theirs.calls == [] and len(tasks.tasks) == 1  # agno's: deferred to after the response
    assert ours.stats()["submitted"] == 1  # ours: queued during the run
    assert judgehooks.drain(30) and len(store.records) == 1


def test_run_in_background_reads_the_same_to_every_reader(make_judge, tmp_path):
    """No setting answers differently depending on who reads it: agno's normaliser and a user both
    read False (agno never schedules our hooks); the setting itself is the hook settings'."""
    from agno.hooks.decorator import HOOK_RUN_IN_BACKGROUND_ATTR
    from agno.utils.hooks import normalize_post_hooks

    ours = make_judge(run_in_background=True, outbox=str(tmp_path / "o.db"))
    [hook] = normalize_post_hooks([ours])
    assert getattr(hook, HOOK_RUN_IN_BACKGROUND_ATTR) is ours.run_in_background is agno_compat.AGNO_SCHEDULES_US
    assert ours.hook_settings.run_in_background is True


# ---- 3. the judge's usage in the run's metrics ---------------------------------------------------


def test_agnos_metric_folding_is_what_fold_judge_usage_reproduces():
    """agno's `accumulate_eval_metrics` adds the judge's tokens to the run's and files its model
    under details["eval_model"] and its time under additional_metrics["eval_duration"]."""
    from agno.metrics import RunMetrics

    record = judgehooks.EvalRecord(id="r", status="passed", evaluator="e", mode="binary", passed=True,
                                   judge_model="openai/judge", attempts=1, prompt_tokens=7, completion_tokens=3,
                                   latency_ms=250)
    run = RunMetrics(input_tokens=1, output_tokens=1, total_tokens=2)
    agno_compat.fold_judge_usage(record, run)
    assert run.total_tokens == 12
    [model] = run.details["eval_model"]
    assert (model.provider, model.id, model.total_tokens) == ("openai", "judge", 10)
    assert run.additional_metrics["eval_duration"] == 0.25


# ---- 4. hooks copied with the agent --------------------------------------------------------------


def test_agno_deep_copies_hooks_with_the_agent_and_ours_stay_themselves(make_agent, make_judge):
    """`Agent.deep_copy()` (AgentOS: one per request) deep-copies the post_hooks list; a plain
    BaseEval is duplicated, ours is the same evaluator (its store, queue and counters)."""
    plain, ours = PlainEval(), make_judge()
    copy = make_agent(plain, ours).deep_copy()
    assert copy.post_hooks[0] is not plain and copy.post_hooks[1] is ours


# ---- 5. agno's fields assigned after construction ------------------------------------------------


def test_the_assignable_deployment_settings_are_exactly_agnos_own_fields():
    """agno's `AgentAsJudgeEval` is a dataclass whose fields its users assign; those among our
    deployment settings stay assignable (`AGNO_ASSIGNED`), the others change through configure."""
    import dataclasses

    from agno.eval.agent_as_judge import AgentAsJudgeEval as AgnoEval

    from judgehooks._hooks.deployment import SETTINGS

    assert agno_compat.AGNO_ASSIGNED == {f.name for f in dataclasses.fields(AgnoEval)} & set(SETTINGS)


# ---- 6. continue_run without the normaliser --------------------------------------------------------


def test_agnos_continue_run_calls_hooks_it_never_normalised(make_agent, make_judge, store, caplog):
    """An agent whose first call is `continue_run` keeps its post_hooks as given: a plain BaseEval
    there is called as an object (agno logs a TypeError, the run is not graded); ours is callable
    (`Evaluator.__call__`) and grades it."""
    from agno.tools import tool

    @tool(requires_confirmation=True)
    def lookup(text: str) -> str:
        """Look something up."""
        return "LOOKED-UP"

    paused = make_agent(tools=[lookup]).run("use a tool [[tool=lookup]]")
    for req in paused.active_requirements:
        req.confirm()
    plain = PlainEval()
    fresh = make_agent(plain, make_judge(), tools=[lookup])
    with caplog.at_level(logging.ERROR):
        done = fresh.continue_run(run_response=paused, requirements=paused.requirements)
    assert not fresh._hooks_normalised and plain.calls == []
    assert "'PlainEval' object is not callable" in caplog.text
    [record] = store.records
    assert record.run_id == done.run_id and record.output == done.content


# ---- 7. the workflow step, named while it runs -----------------------------------------------------


def test_agno_tells_a_steps_post_hooks_the_workflow_but_not_the_step(make_agent):
    """agno's own objects: inside a step's agent, the post hook sees the workflow's run context
    (id, name, the workflow run's id) but no step; agno names the step on the output only after the
    hooks ran. When agno hands the step to the hooks, workaround 7 can go."""
    from agno.workflow import Step, Workflow

    seen: list[dict[str, Any]] = []

    def hook(run_output: Any, run_context: Any = None) -> None:
        seen.append({"step_on_output": getattr(run_output, "workflow_step_id", None),
                     "step_in_context": [f for f in vars(run_context) if "step" in f],
                     "workflow": (run_context.workflow_id, run_context.workflow_name, run_context.run_id)})

    agent = make_agent(hook)
    out = Workflow(name="flow", id="wf-x", steps=[Step(name="only", agent=agent)], telemetry=False).run("hi")
    assert seen == [{"step_on_output": None, "step_in_context": [], "workflow": ("wf-x", "flow", out.run_id)}]
    assert out.step_executor_runs is None or all(r.workflow_step_id for r in out.step_executor_runs)
    assert agno_compat.install_step_names() and agno_compat.STEP.get() is None  # set only while a step runs
