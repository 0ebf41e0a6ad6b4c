"""EvalContext: a frozen snapshot of one agno run, taken on the hook path.

Evaluators read only this snapshot, never agno's live `RunOutput`, so a run that goes on mutating
its output (or a deferred grading on another thread) cannot change what is judged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .text import storable, storable_data


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the run made: what was called, with what, and what came back."""

    name: str
    arguments: Mapping[str, Any] | None = None
    result: str | None = None
    error: bool = False
    agent_id: str | None = None  # the member agent that made it, in a team run

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": dict(self.arguments or {}), "result": self.result,
                "error": self.error, "agent_id": self.agent_id}


@dataclass(frozen=True, slots=True)
class RunUsage:
    """The run's cost figures from agno's `run_output.metrics`, read when its post hooks start
    (the run's timer is still going then: latency is the time elapsed so far)."""

    latency_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None  # None when the provider reports no cost

    def as_dict(self) -> dict[str, Any]:
        return {"latency_ms": self.latency_ms, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "total_tokens": self.total_tokens, "cost_usd": self.cost_usd}


@dataclass(frozen=True, slots=True)
class EvalContext:
    """Everything an evaluator may look at for one judged run (or one offline case)."""

    input: str
    output: str
    run_id: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    agent_name: str | None = None
    team_id: str | None = None
    team_name: str | None = None
    expected: str | None = None  # offline: the case's expected_output; live: metadata["expected"]
    tool_calls: tuple[ToolCall, ...] = ()  # in the order made, team members' included
    run_status: str | None = None
    usage: RunUsage | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # agno's session_state as the run left it (JSON-like data, copied): a later run of the session
    # cannot change what this one is judged with
    session_state: Mapping[str, Any] = field(default_factory=dict)
    case_index: int | None = None  # position in an offline batch
    trace_id: str | None = None  # the judged run's OpenTelemetry span, as lowercase hex, when one was current
    span_id: str | None = None
    redacted_by: str | None = None  # the redactor its text went through (judgehooks.redact)
    redaction_error: str | None = None  # the redactor raised (its type): the text was withheld


def render_content(content: Any) -> str:
    """The run's output as the judge should read it: pydantic models and containers as JSON. Always
    storable text (`storable`): a lone UTF-16 surrogate, which pydantic's JSON refuses, becomes U+FFFD."""
    if content is None:
        return ""
    if isinstance(content, str):
        return storable(content)
    dump = getattr(content, "model_dump_json", None)
    if callable(dump):
        try:
            text: str = dump()  # a pydantic model's JSON
            return text
        except ValueError:  # PydanticSerializationError: e.g. a lone surrogate in a field
            content = storable_data(content.model_dump(mode="json"))
            return json.dumps(content, ensure_ascii=False, separators=(",", ":"))
    try:
        return storable(json.dumps(content, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return storable(str(content))


def context_to_dict(ctx: EvalContext) -> dict[str, Any]:
    """A JSON-ready dict of the context, for the durable outbox."""
    return {
        "input": ctx.input, "output": ctx.output, "run_id": ctx.run_id, "session_id": ctx.session_id,
        "user_id": ctx.user_id, "agent_id": ctx.agent_id, "agent_name": ctx.agent_name,
        "team_id": ctx.team_id, "team_name": ctx.team_name, "expected": ctx.expected,
        "tool_calls": [c.as_dict() for c in ctx.tool_calls], "run_status": ctx.run_status,
        "metadata": dict(ctx.metadata), "case_index": ctx.case_index,
        "usage": None if ctx.usage is None else ctx.usage.as_dict(),
        "trace_id": ctx.trace_id, "span_id": ctx.span_id,
        # only when set: a job of a run nobody redacted (or with no session state) reads the same in a
        # version without them
        **{k: v for k, v in (("redacted_by", ctx.redacted_by), ("redaction_error", ctx.redaction_error)) if v},
        **({"session_state": dict(ctx.session_state)} if ctx.session_state else {}),
    }


#: the fields `context_from_dict` reads on their own (forged trace ids and a session state that is
#: no mapping are dropped, not refused)
_READ_APART = ("tool_calls", "usage", "trace_id", "span_id", "session_state")


def context_from_dict(data: Any) -> EvalContext:
    """The context of a job read back (the outbox, a journal, a Redis stream, a session book), where
    anyone may have written it. TypeError or ValueError naming the field, for anything `context_to_dict`
    never writes: a value of the wrong type, a key EvalContext has not, a lone surrogate in a text (no
    record id can be made of it). Every reader refuses such a job before a judge is paid for it."""
    _check(EvalContext, data, "its context", skip=_READ_APART)
    calls = data.get("tool_calls") or []
    if type(calls) is not list:
        raise TypeError(f"its context's tool_calls is {type(calls).__name__}, not a list")
    given = {k: v for k, v in data.items() if k not in _READ_APART}
    state = data.get("session_state")
    usage = data.get("usage")
    trace_id, span_id = _hex_id(data.get("trace_id"), 32), _hex_id(data.get("span_id"), 16)
    if trace_id is None or span_id is None:  # a job from an older version, or ids that are not OpenTelemetry's
        trace_id = span_id = None
    return EvalContext(**given, tool_calls=tuple(ToolCall(**_check(ToolCall, c, "a tool call")) for c in calls),
                       usage=None if usage is None else RunUsage(**_check(RunUsage, usage, "its usage")),
                       trace_id=trace_id, span_id=span_id, session_state=state if isinstance(state, dict) else {})


#: what a field may hold once read back from JSON, by its annotation, and how a message says it
_JSON_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "str": ((str,), "text"),
    "str | None": ((str, type(None)), "text or null"),
    "int | None": ((int, type(None)), "an integer or null"),
    "float | None": ((int, float, type(None)), "a number or null"),
    "bool": ((bool,), "true or false"),
    "Mapping[str, Any]": ((dict,), "a mapping"),
    "Mapping[str, Any] | None": ((dict, type(None)), "a mapping or null"),
}


def _check(cls: type, data: Any, where: str, skip: tuple[str, ...] = ()) -> Any:
    """`data`, once it is a JSON object whose every field of dataclass `cls` (but `skip`) is of the
    field's type (exactly: JSON's true is no integer) and whose texts are UTF-8."""
    if type(data) is not dict:
        raise TypeError(f"{where} is not a JSON object but {type(data).__name__}")
    for spec in fields(cls):
        if spec.name in data and spec.name not in skip:
            value = data[spec.name]
            allowed, said = _JSON_TYPES[spec.type]  # type: ignore[index]  # annotations are text here
            if type(value) not in allowed:
                raise TypeError(f"{where}'s {spec.name} is {type(value).__name__}, not {said}")
            if type(value) is str and storable(value) is not value:
                raise ValueError(f"{where}'s {spec.name} is not UTF-8 text (surrogates not allowed)")
    return data


def _hex_id(value: Any, digits: int) -> str | None:
    """An OpenTelemetry trace or span id as lowercase hex (`digits` long, not all zeros), else None."""
    if not isinstance(value, str) or len(value) != digits or value == "0" * digits:
        return None
    return value if all(c in "0123456789abcdef" for c in value) else None
