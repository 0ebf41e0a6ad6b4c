"""Runs inside an agno Workflow: which workflow, which of its runs, and which step.

agno hands a step's agent (or team) the workflow's `run_context`: its `workflow_id`,
`workflow_name` and, as `run_id`, the workflow run's id, all there when the agent's post hooks run.
The step is not: agno names it on the step's output only after the agent's run (and its hooks)
returned. So the step's name and id ride in a context variable that `Step.execute` (and its async
and streamed forms) set while the step runs (`install_step_names`, workaround 7 in `agno_compat`): a
parallel step's thread, a loop's iterations and a router's choice each see their own step.

`workflow_metadata` is what a record of such a run carries in its metadata: `workflow_id`,
`workflow_name`, `workflow_run_id`, `step_name` and `step_id`.
"""

from __future__ import annotations

from typing import Any

from .agno_compat import STEP, install_step_names


def workflow_metadata(run_context: Any) -> dict[str, Any]:
    """The workflow a run belongs to, for its record's metadata; {} for a run outside a workflow."""
    workflow_id = getattr(run_context, "workflow_id", None)
    if not isinstance(workflow_id, str) or not workflow_id:
        return {}
    install_step_names()  # a workflow imported after the evaluators were built: its later steps are named
    found: dict[str, Any] = {"workflow_id": workflow_id}
    name, run_id = getattr(run_context, "workflow_name", None), getattr(run_context, "run_id", None)
    if isinstance(name, str):
        found["workflow_name"] = name
    if isinstance(run_id, str):
        found["workflow_run_id"] = run_id
    step = STEP.get()
    if step is not None:
        found["step_name"], found["step_id"] = step
    return found


def whole_run_metadata(run_output: Any) -> dict[str, Any]:
    """A whole workflow run's output (agno's `WorkflowRunOutput`) handed to a hook: the workflow it
    ran, for its record's metadata (no step: the run's final output). {} for any other run."""
    if not hasattr(run_output, "step_results") or not hasattr(run_output, "workflow_name"):
        return {}
    found = {"workflow_id": getattr(run_output, "workflow_id", None),
             "workflow_name": getattr(run_output, "workflow_name", None),
             "workflow_run_id": getattr(run_output, "run_id", None)}
    return {key: value for key, value in found.items() if isinstance(value, str)}
