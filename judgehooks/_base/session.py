"""A conversation as `SessionJudge` grades it: the turns of one session, each a frozen run snapshot.

A `Turn` is one run of the agent or team (its `EvalContext`) plus, for a team run, what each
member was asked and answered, in order. Turns travel as JSON data through the session book (a
SQLite file) and the agno-db reader, so they are rebuilt from plain dicts here, once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .context import EvalContext, context_from_dict, context_to_dict


@dataclass(frozen=True, slots=True)
class Member:
    """One member run inside a team run: who it was, what it was asked, what it answered."""

    name: str | None
    input: str
    output: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "input": self.input, "output": self.output}


@dataclass(frozen=True, slots=True)
class Turn:
    """One run of a session: its snapshot and, for a team run, its members' runs in order."""

    run: EvalContext
    members: tuple[Member, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"run": context_to_dict(self.run), "members": [m.as_dict() for m in self.members]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        if not isinstance(data, Mapping):  # read back from a file or a stream: hostile
            raise ValueError(f"not a turn (a JSON object with its run): {data!r:.80}")
        members = tuple(Member(name=None if m.get("name") is None else str(m["name"]), input=str(m.get("input") or ""),
                               output=str(m.get("output") or "")) for m in data.get("members") or ())
        return cls(run=context_from_dict(data["run"]), members=members)


@dataclass(frozen=True, slots=True)
class SessionContext(EvalContext):
    """What a session evaluator reads: the context of the session's last turn (ids, user) with
    every turn of the evaluation window, in order, in `turns`."""

    turns: tuple[Turn, ...] = ()

    @classmethod
    def of(cls, turns: Sequence[Turn]) -> SessionContext:
        """The context of a window of turns: ids and user from its last turn, the first input and the
        last output as the record's input and output."""
        if not turns:
            raise ValueError("a session context needs at least one turn")
        first, last = turns[0].run, turns[-1].run
        # Redacted turns make a redacted session; one whose text a redactor withheld makes the
        # session's record a RedactionError, as a run's would be, rather than a verdict on a gap.
        redacted_by = next((t.run.redacted_by for t in reversed(turns) if t.run.redacted_by), None)
        redaction_error = next((t.run.redaction_error for t in turns if t.run.redaction_error), None)
        return cls(input=first.input, output=last.output, run_id=None, session_id=last.session_id,
                   user_id=last.user_id, agent_id=last.agent_id, agent_name=last.agent_name, team_id=last.team_id,
                   team_name=last.team_name, metadata={}, turns=tuple(turns), redacted_by=redacted_by,
                   redaction_error=redaction_error, trace_id=last.trace_id, span_id=last.span_id)

    @property
    def run_ids(self) -> list[str]:
        return [t.run.run_id or "" for t in self.turns]
