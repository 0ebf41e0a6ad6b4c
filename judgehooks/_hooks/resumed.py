"""Runs that pause for a person (agno's human in the loop), and the runs that resume them.

agno pauses a run when a tool needs a confirmation (``requires_confirmation=True``), user input
(``requires_user_input=True``) or external execution (``external_execution=True``): the run comes
back with status ``PAUSED`` and, instead of an answer, agno's note of what it waits for.
`continue_run` / `acontinue_run` finish it under the same run id (``fork=True`` gives it a new one
and names the original in ``forked_from_run_id``), and that finished run is what agno hands to the
post hooks.

A paused run is not finished, so it is not graded: no record, and nothing counted by sampling (the
hook steps aside before it samples). agno 3.x calls no post hook on a paused run; a hook called on
one anyway (by hand, or on a gate's repair re-run that paused again) steps aside here, quietly. The
resumed run is graded once, on its final answer, and its record's metadata links it to the pause
(`resume_metadata`), from what agno keeps on the run: the requirements a person resolved.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from .._base.text import storable

#: agno's `RunStatus.paused`
PAUSED = "PAUSED"


def is_paused(run_output: Any) -> bool:
    """Whether `run_output` is a run waiting for a person: paused, or with a requirement unresolved."""
    status = getattr(run_output, "status", None)
    if getattr(status, "value", status) == PAUSED:
        return True
    return any(not _resolved(req) for req in getattr(run_output, "requirements", None) or ())


def resume_metadata(run_output: Any) -> dict[str, Any]:
    """What links a resumed run's record to its pause; {} for a run that never paused.

    - ``resumed_from_run_id``: the run that paused (the same run id unless resumed with ``fork=True``);
    - ``paused_at``: when it first paused (ISO 8601, UTC), from agno's first requirement;
    - ``paused_for``: each thing a person resolved, in order: the tool, the kind of pause
      (agno's ``pause_type``: "confirmation", "user_input", "user_feedback", "external_execution"),
      the decision ("confirmed", "rejected" or "resolved") and, for a team member's pause, the
      member's run id.
    """
    if not getattr(run_output, "requirements", None) and not getattr(run_output, "member_responses", None):
        return {}  # the usual run (this is on every run's hook path): nothing to walk
    requirements = list(_requirements(run_output))
    if not requirements:
        return {}
    run_id = getattr(run_output, "forked_from_run_id", None) or getattr(run_output, "run_id", None)
    found: dict[str, Any] = {"resumed_from_run_id": _text(run_id)}
    times = [req.created_at for req, _ in requirements if isinstance(getattr(req, "created_at", None), datetime)]
    if times:  # agno keeps requirements in order of arrival: the first is the first pause
        found["paused_at"] = times[0].isoformat()
    found["paused_for"] = [_describe(req, owner_run, run_output) for req, owner_run in requirements]
    return found


def _requirements(run_output: Any) -> Iterator[tuple[Any, Any]]:
    """(requirement, run that paused for it): the run's own, then its team members' runs', each once
    (a team keeps its member's requirement on the member's run after the resume)."""
    seen: set[Any] = set()

    def walk(output: Any) -> Iterator[tuple[Any, Any]]:
        for req in getattr(output, "requirements", None) or ():
            tool = getattr(req, "tool_execution", None)
            key = getattr(tool, "tool_call_id", None) or id(req)
            if key not in seen:
                seen.add(key)
                yield req, output
        for member in getattr(output, "member_responses", None) or ():
            yield from walk(member)

    yield from walk(run_output)


def _describe(req: Any, owner_run: Any, run_output: Any) -> dict[str, Any]:
    tool = getattr(req, "tool_execution", None)
    kind = _kind(req, tool)
    confirmed = getattr(req, "confirmation", None)
    if confirmed is None:
        confirmed = getattr(tool, "confirmed", None)
    decision = ("confirmed" if confirmed else "rejected") if kind == "confirmation" and confirmed is not None \
        else "resolved"
    item: dict[str, Any] = {"tool": _text(getattr(tool, "tool_name", None)), "kind": _text(kind),
                            "decision": decision}
    member_run = getattr(req, "member_run_id", None) or (
        getattr(owner_run, "run_id", None) if owner_run is not run_output else None)
    if member_run is not None:
        item["member_run_id"] = _text(member_run)
    return item


def _kind(req: Any, tool: Any) -> str:
    """agno's ``pause_type``, read from what stays on a resolved requirement (agno clears a tool's
    ``requires_user_input`` once the input is given, and its ``pause_type`` then says "confirmation")."""
    if getattr(req, "user_feedback_schema", None) or getattr(tool, "user_feedback_schema", None):
        return "user_feedback"
    if getattr(req, "external_execution_result", None) is not None or getattr(tool, "external_execution_required",
                                                                               None):
        return "external_execution"
    if getattr(req, "user_input_schema", None) or getattr(tool, "requires_user_input", None) \
            or getattr(tool, "user_input_schema", None):
        return "user_input"
    return "confirmation"


def _resolved(req: Any) -> bool:
    check = getattr(req, "is_resolved", None)
    return bool(check()) if callable(check) else True


def _text(value: Any) -> Any:
    return storable(value) if isinstance(value, str) else value
