"""Streamed runs held until the gate passes: `judgehooks.stream` and `judgehooks.astream`.

agno runs an agent's or team's ``post_hooks`` inside its stream, after the last content event has
gone to the client, so a gate on a plain streamed run gates nothing (agno-agi/docs#164). These run
the same agno stream (``stream=True``) and withhold its content events until the stream ends. The
gate itself is still agno's own post-hook call, once per run, into one stored record: this module
never grades, it only reads how agno ended the run.

- passed: the held content events, in order, then what follows (the completed event);
- repaired: the gate replaced the run's content, so one content event carries the repaired answer
  instead of the rejected text;
- blocked (the gate's `OutputCheckError`, which agno turns into its run error event): the held
  content is dropped, one content event carries the gate's fallback, then a completed event;
- any other error: the held content was never checked and is dropped; agno's error event follows.

Other events (tool calls, reasoning, hooks) pass through as they come; ``hold="all"`` holds them
too. A member's content in a team stream is held with the leader's, and dropped if the member's own
gate blocked it. Without a gate in the post hooks (the owner's or a member's) nothing is held.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import fields
from typing import Any, Literal

from .agno_compat import MARKER

Hold = Literal["content", "all"]
_CONTENT = {"RunContent", "RunIntermediateContent", "TeamRunContent", "TeamRunIntermediateContent"}
_ERRORS = {"RunError", "TeamRunError"}
#: the events that say the content is over: they follow the content they close
_CLOSING = {"RunContentCompleted", "TeamRunContentCompleted", "RunCompleted", "TeamRunCompleted"}


def stream(agent_or_team: Any, input: Any, *, hold: Hold = "content", **run_kwargs: Any) -> Iterator[Any]:
    """Run `agent_or_team` with ``stream=True`` and yield agno's events, content held until every
    gate in its post hooks has passed (see the module docstring)."""
    holder = _Holder(agent_or_team, hold, run_kwargs)
    for event in agent_or_team.run(input, **holder.kwargs):
        yield from holder.feed(event)
    yield from holder.end()


async def astream(agent_or_team: Any, input: Any, *, hold: Hold = "content", **run_kwargs: Any) -> AsyncIterator[Any]:
    """`stream` for ``arun``: the same events, from agno's async stream."""
    holder = _Holder(agent_or_team, hold, run_kwargs)
    async for event in agent_or_team.arun(input, **holder.kwargs):
        for out in holder.feed(event):
            yield out
    for out in holder.end():
        yield out


def gated(owner: Any) -> bool:
    """Whether a judgehooks gate sits in the post hooks of `owner` or of any of its members."""
    for hook in list.__iter__(getattr(owner, "post_hooks", None) or []):
        target = getattr(getattr(hook, "func", hook), "__self__", hook)
        shell = getattr(target, "__dict__", {}).get("_shell") if getattr(target, MARKER, False) else None
        if shell is not None and shell.gate is not None:
            return True
    return any(gated(member) for member in getattr(owner, "members", None) or [])


class _Holder:
    """What a client sees of one streamed run: events in, the events to yield out."""

    def __init__(self, owner: Any, hold: Hold, run_kwargs: dict[str, Any]) -> None:
        if hold not in ("content", "all"):
            raise ValueError(f"hold must be 'content' or 'all', got {hold!r}")
        if run_kwargs.get("stream", True) is not True:
            raise ValueError("judgehooks.stream runs the agent with stream=True; do not pass stream=False")
        self.wanted_output = bool(run_kwargs.get("yield_run_output"))
        self.kwargs = {**run_kwargs, "stream": True, "yield_run_output": True}
        self.active = gated(owner)
        self.hold_all = hold == "all"
        self.held: list[Any] = []
        self.blocked_runs: set[str | None] = set()
        self.gate_error: Any = None  # a gate's error event, until we know whether it ends the stream

    def feed(self, event: Any) -> list[Any]:
        out: list[Any] = []
        if self.gate_error is not None:  # it did not end the stream: a member's gate blocked a member's run
            out.append(self.gate_error)
            self.gate_error = None
        kind = getattr(event, "event", None)
        if not self.active:
            return out if _is_run_output(event) and not self.wanted_output else [*out, event]
        if kind in _ERRORS and _from_gate(event):
            self.blocked_runs.add(event.run_id)
            self.gate_error = event
        elif kind in _CONTENT or kind in _CLOSING or self.hold_all or _is_run_output(event):
            self.held.append(event)
        elif kind in _ERRORS:  # not a gate: the held content was never checked
            self.held = [e for e in self.held if getattr(e, "event", None) not in _CONTENT]
            out.extend([*self.held, event])
            self.held = []
        else:
            out.append(event)
        return out

    def end(self) -> list[Any]:
        if not self.active:
            return []
        if self.gate_error is not None:  # the stream ended with a gate's block
            error = self.gate_error
            self.blocked_runs.add(error.run_id)
            rest = [e for e in self._released() if getattr(e, "event", None) not in _ERRORS]
            return [*rest, _event_like(error, "content", error.content), _event_like(error, "completed",
                                                                                    error.content)]
        output = next((e for e in self.held if _is_run_output(e)), None)
        released = self._released()
        if output is not None:
            released = self._final_content(released, output)
        return [e for e in released if self.wanted_output or not _is_run_output(e)]

    def _released(self) -> list[Any]:
        """The held events still to show: content of a run a gate blocked is dropped."""
        return [e for e in self.held
                if not (getattr(e, "event", None) in _CONTENT and getattr(e, "run_id", None) in self.blocked_runs)]

    @staticmethod
    def _final_content(events: list[Any], output: Any) -> list[Any]:
        """After a repair the run's content is not what was streamed: show the run's content instead."""
        own = [e for e in events if getattr(e, "event", None) in _CONTENT and e.run_id == output.run_id]
        pieces = [e.content for e in own if e.content is not None]
        streamed: Any = "".join(pieces) if all(isinstance(p, str) for p in pieces) else (pieces[-1] if pieces else None)
        if streamed == output.content or not own:
            return events
        mine = {id(e) for e in own}
        first = next(i for i, e in enumerate(events) if id(e) in mine)
        kept = [e for e in events if id(e) not in mine]
        kept.insert(first, _event_like(own[0], "content", output.content))
        return kept


def _is_run_output(event: Any) -> bool:
    from agno.run.agent import RunOutput
    from agno.run.team import TeamRunOutput

    return isinstance(event, (RunOutput, TeamRunOutput))


def _from_gate(event: Any) -> bool:
    """A run error raised by a judgehooks gate (`Gate.block` names its evaluator and record)."""
    data = getattr(event, "additional_data", None)
    return isinstance(data, dict) and "evaluator" in data and "repair_attempts" in data


def _event_like(source: Any, kind: Literal["content", "completed"], content: Any) -> Any:
    """agno's content or completed event for the run `source` belongs to (an agent's or a team's)."""
    from agno.run import agent, team

    module: Any = team if getattr(source, "event", "").startswith("Team") else agent
    cls = module.RunContentEvent if kind == "content" else module.RunCompletedEvent
    names = {f.name for f in fields(cls)} & {f.name for f in fields(type(source))}
    shared = {n: getattr(source, n) for n in names if n not in ("event", "created_at", "content")}
    return cls(**shared, content=content)
