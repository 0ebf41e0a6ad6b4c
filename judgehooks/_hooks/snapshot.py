"""The snapshot of a live agno run that every evaluator reads (never agno's RunOutput itself).

Its text is made storable here, once (`storable`: a lone UTF-16 surrogate becomes U+FFFD), and goes
through the `redact=` function, before the judge, the outbox, Redis or any store sees it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .._base.context import EvalContext, RunUsage, ToolCall, render_content
from .._base.text import storable, storable_data
from .identity import stable_id
from .redaction import redact_context
from .resumed import resume_metadata
from .workflow import whole_run_metadata


def _tool_calls(run_output: Any) -> tuple[ToolCall, ...]:
    """Every tool call of the run in the order made. In a team run a member's calls follow the
    leader's call that delegated to it (agno's k-th member response answers the k-th
    `delegate_task_to_member`; `delegate_task_to_members` reaches all the rest)."""
    calls: list[ToolCall] = []

    def collect(output: Any) -> None:
        agent_id = getattr(output, "agent_id", None)
        members = list(getattr(output, "member_responses", None) or ())
        for tool in getattr(output, "tools", None) or ():
            calls.append(ToolCall(
                name=storable(tool.tool_name or ""), arguments=storable_data(dict(tool.tool_args or {})),
                result=None if tool.result is None else storable(str(tool.result)),
                error=bool(tool.tool_call_error), agent_id=agent_id))
            if tool.tool_name == "delegate_task_to_member" and members:
                collect(members.pop(0))
            elif tool.tool_name == "delegate_task_to_members":
                while members:
                    collect(members.pop(0))
        for member in members:
            collect(member)

    collect(run_output)
    return tuple(calls)


def _usage(run_output: Any) -> RunUsage | None:
    metrics = getattr(run_output, "metrics", None)
    if metrics is None:
        return None
    seconds = getattr(metrics, "duration", None)
    timer = getattr(metrics, "timer", None)
    if seconds is None and timer is not None and getattr(timer, "start_time", None) is not None:
        seconds = timer.elapsed
    # a workflow's metrics (agno's WorkflowMetrics) hold a duration and no tokens of their own
    return RunUsage(latency_ms=None if seconds is None else round(seconds * 1000, 3),
                    input_tokens=_count(getattr(metrics, "input_tokens", None)),
                    output_tokens=_count(getattr(metrics, "output_tokens", None)),
                    total_tokens=_count(getattr(metrics, "total_tokens", None)),
                    cost_usd=getattr(metrics, "cost", None))


def _count(value: Any) -> int | None:
    """A token count as a record keeps it and a job reads back: a whole number (12.0 from a provider
    that counts in floats is 12), else none (text, 12.5, a bool)."""
    if type(value) is int:
        return value
    return int(value) if type(value) is float and value.is_integer() else None


def session_state_of(run_context: Any, run_output: Any) -> Any:
    """The run's session_state as agno's post hooks see it: the run context's (agno passes
    `run_context` to hooks that name it), else the one on the run's output (agno fills that one in
    only after the hooks, so it is the fallback for a run graded later, e.g. by `ascore`)."""
    state = getattr(run_context, "session_state", None)
    return state if state is not None else getattr(run_output, "session_state", None)


#: the keys agno adds to every run's session_state and removes before it stores the session
#: (agent/_session.py, team/_session.py): the run's own ids, which the context and record carry
AGNO_RUN_KEYS = frozenset({"current_session_id", "current_user_id", "current_run_id"})


def plain_state(state: Any) -> dict[str, Any]:
    """A copy of a session_state as JSON-like data (what the judge, the outbox and the stores can
    hold), without `AGNO_RUN_KEYS`: objects as their JSON (a pydantic model) or their text. A state
    that cannot be copied so (a cycle, keys that are not text or numbers) keeps its top-level keys,
    each value as its text."""
    if not isinstance(state, Mapping) or not state:
        return {}
    state = {key: value for key, value in state.items() if key not in AGNO_RUN_KEYS}
    if not state:  # a run with no state of its own: nothing to copy, nothing for every job to carry
        return {}
    try:
        copied: dict[str, Any] = _copy(state, 0)  # the usual state: plain data, walked once
        return copied
    except _NotPlain:
        pass
    try:
        data = json.loads(json.dumps(state, default=_jsonable, ensure_ascii=False))
        if _deeper_than(data, DEEPEST):  # Python 3.13's JSON goes deeper than the walks after it can
            raise RecursionError
        return dict(storable_data(data))
    except Exception:  # TypeError, ValueError (a cycle), RecursionError, an object's own error
        data = {_text_of(key): _text_of(value) for key, value in state.items()}
    return dict(storable_data(data))


#: nesting past this is named by its type, on every Python (3.13 reads and prints far deeper than 3.11)
DEEPEST = 200


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether containers nest past `limit` levels in `value` (without recursing: any depth)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen: set[int] = set()
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth > limit:
                return True
            if id(item) in seen:
                continue
            seen.add(id(item))
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _text_of(value: Any) -> str:
    """A value's text; one whose text cannot be had (nested past Python's recursion limit, a
    `__str__` that raises) is named by its type: the run is graded, never lost to its state."""
    try:
        if _deeper_than(value, DEEPEST):
            raise RecursionError
        return str(value)
    except Exception:  # RecursionError included
        return f"<{type(value).__name__} that could not be read as text>"


class _NotPlain(Exception):
    """Data `_copy` leaves to JSON's encoder: an object, a key that is not text, or deep nesting."""


_SCALARS = (int, float, bool, type(None))


def _copy(value: Any, depth: int) -> Any:
    """A deep copy of plain JSON-like data, its text made storable: a few microseconds for a small
    state, several times less than a JSON round trip (this runs on every run's hook path)."""
    kind = type(value)
    if kind is str:
        return storable(value)
    if kind in _SCALARS:
        return value
    if depth > 64:
        raise _NotPlain
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            out[storable(key)] = _copy(item, depth + 1)
        return out
    if kind is list or kind is tuple:
        return [_copy(item, depth + 1) for item in value]
    raise _NotPlain


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json")
        except Exception:  # e.g. a lone surrogate: its text instead
            pass
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return _text_of(value)


def snapshot_run(run_output: Any, *, agent: Any = None, team: Any = None, user_id: str | None = None,
                 metadata: Mapping[str, Any] | None = None, with_tools: bool = False,
                 trace: tuple[str | None, str | None] = (None, None),
                 redact: Callable[[str], str] | None = None, session_state: Any = None) -> EvalContext:
    """Take the frozen snapshot agno's post hook needs, for an Agent or a Team run (redacted by
    `redact`); `trace` is the run's OpenTelemetry (trace id, span id), captured by the hook;
    `session_state` is the run's (`session_state_of`), copied now: the session may change later."""
    is_team = hasattr(run_output, "team_id") and not hasattr(run_output, "agent_id")
    run_input = getattr(run_output, "input", None)
    status = getattr(run_output, "status", None)
    merged: dict[str, Any] = dict(getattr(run_output, "metadata", None) or {})
    merged.update(metadata or {})
    merged.update(resume_metadata(run_output))  # a resumed run: the link to its pause (agno's, not the caller's)
    whole = whole_run_metadata(run_output)  # a whole workflow run: its final output, no agent or team
    merged.update(whole)
    if whole:
        agent_id = agent_name = team_id = team_name = None
    elif is_team:
        agent_id = agent_name = None
        team_id = stable_id(team, getattr(run_output, "team_id", None) or getattr(team, "id", None))
        team_name = getattr(run_output, "team_name", None) or getattr(team, "name", None)
    else:
        agent_id = stable_id(agent, run_output.agent_id or getattr(agent, "id", None))
        agent_name = run_output.agent_name or getattr(agent, "name", None)
        # A member agent's run inside a team carries the team in its parent context.
        team_id = getattr(run_output, "team_id", None) or getattr(agent, "team_id", None)
        team_name = None
    ctx = EvalContext(
        input=("" if run_input is None else storable(run_input.input_content_string())
               if hasattr(run_input, "input_content_string") else render_content(run_input)),
        output=render_content(run_output.content),  # storable already
        run_id=_text(run_output.run_id),
        session_id=_text(run_output.session_id),
        user_id=_text(user_id or run_output.user_id),
        agent_id=_text(agent_id),
        agent_name=_text(agent_name),
        team_id=_text(team_id),
        team_name=_text(team_name),
        expected=None if merged.get("expected") is None else render_content(merged["expected"]),
        tool_calls=_tool_calls(run_output) if with_tools else (),
        run_status=getattr(status, "value", status),
        usage=_usage(run_output),
        metadata=storable_data(merged),
        session_state=plain_state(session_state),
        trace_id=trace[0],
        span_id=trace[1],
    )
    return ctx if redact is None else redact_context(ctx, redact)


def _text(value: Any) -> Any:
    return storable(value) if isinstance(value, str) else value
