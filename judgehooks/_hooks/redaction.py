"""`redact=`: the run's text goes through the user's redactor in the snapshot, before the judge, the
outbox, a Redis job, a notifier or a store can see it.

Redacted: input, output, expected, tool call arguments and results, and metadata and session_state
values (every string, at any depth; other values that are not numbers, booleans or None become
their text first). Kept: identifiers (run, session, user, agent and team ids and names), tool names,
and metadata and session_state keys.
A redactor that raises (or returns something other than text) withholds all of that text: the run's
record is an `error` (`RedactionError`) and its text is empty, so no unredacted byte leaves the process.
A session turn (`redact_turn`) is the run plus what each team member was asked and answered: the
members' text is redacted with the run's, and withheld with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .._base.context import EvalContext
from .._base.session import Member, Turn
from .._base.text import storable
from ..redact import redactor_name

Redactor = Callable[[str], str]


def redact_context(ctx: EvalContext, redact: Redactor) -> EvalContext:
    """`ctx` with its text redacted and `redacted_by` set; its text withheld if the redactor fails."""
    name = redactor_name(redact)
    text, data = _through(redact)
    try:
        calls = tuple(dataclasses.replace(c, arguments=None if c.arguments is None else data(dict(c.arguments)),
                                          result=None if c.result is None else text(c.result))
                      for c in ctx.tool_calls)
        return dataclasses.replace(ctx, input=text(ctx.input), output=text(ctx.output),
                                   expected=None if ctx.expected is None else text(ctx.expected),
                                   tool_calls=calls, metadata=data(dict(ctx.metadata)),
                                   session_state=data(dict(ctx.session_state)), redacted_by=name)
    except Exception as exc:  # never the text, nor the message (it may quote the text): only the type
        return _withheld(ctx, name, exc)


def redact_turn(turn: Turn, redact: Redactor) -> Turn:
    """A session turn redacted as one: its run as `redact_context` does it, and what each team
    member was asked and answered. If the redactor fails on any of it, the whole turn is withheld."""
    run = redact_context(turn.run, redact)
    if run.redaction_error is not None:
        return Turn(run=run, members=tuple(Member(name=m.name, input="", output="") for m in turn.members))
    text, _ = _through(redact)
    try:
        return Turn(run=run, members=tuple(Member(name=m.name, input=text(m.input), output=text(m.output))
                                           for m in turn.members))
    except Exception as exc:
        return Turn(run=_withheld(run, run.redacted_by, exc),
                    members=tuple(Member(name=m.name, input="", output="") for m in turn.members))


def _through(redact: Redactor) -> tuple[Callable[[str], str], Callable[[Any], Any]]:
    """The redactor applied to one text, and to JSON-like data (every string in it)."""

    def text(value: str) -> str:
        out = redact(value)
        if not isinstance(out, str):
            raise TypeError(f"a redactor returns text, got {type(out).__name__}")
        return storable(out)

    def data(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, dict):
            return {k: data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [data(v) for v in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return text(str(value))  # an object would be written as its text: redact that text

    return text, data


def _withheld(ctx: EvalContext, name: str | None, exc: Exception) -> EvalContext:
    return dataclasses.replace(ctx, input="", output="", expected=None, tool_calls=(), metadata={}, session_state={},
                               redacted_by=name, redaction_error=type(exc).__name__)


__all__ = ("Redactor", "redact_context", "redact_turn")
