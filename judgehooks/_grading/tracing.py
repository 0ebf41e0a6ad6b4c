"""Verdicts in the user's traces: one OpenTelemetry `gen_ai.evaluation.result` event per record.

The GenAI semantic conventions (1.38, Development) define the event and its attributes. It is
recorded as a *span event* (not pydantic-evals' log-based event): span events travel in the
trace itself, so every trace backend shows them on the judged run (Phoenix, Jaeger, Tempo and
Logfire read spans; Phoenix takes no OTLP logs at all), and they need no logs pipeline beside the
tracer provider the application already configured.

- Inline grading: the hook runs inside the judged run's span (openinference's `{Agent}.run`), and
  the shell holds that span open here (`holding`) while it grades, so the event lands on it.
- Background, helper-process and worker grading: the span has ended by the time the job is
  graded. The hook captured its ids into the snapshot (`EvalContext.trace_id` / `span_id`, carried
  by the outbox row and the signed Redis job); the event goes on a short `judgehooks.evaluate`
  span that is that span's child and linked to it: the same trace.
- Shed runs (`skipped` records) emit nothing.

OpenTelemetry is an optional extra, and it is never imported here: an application that configured
a tracer provider has imported `opentelemetry.trace` already, so this module reads it from
`sys.modules`; without it (or with no provider set: the API's proxy) every function returns at once.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from .._base.log import log
from .._base.record import EvalRecord

__all__ = ("EVENT", "SPAN_NAME", "current_span", "emit", "event_attributes", "holding")

EVENT = "gen_ai.evaluation.result"
SPAN_NAME = "judgehooks.evaluate"  # the short span that carries a deferred grading's event

_lock = threading.Lock()
#: span id -> (the live span, how many inline gradings hold it): where inline events go
_held: dict[str, tuple[Any, int]] = {}


#: (the global tracer provider last seen, (`opentelemetry.trace`, judgehooks' tracer from it) if it
#: traces else None): the provider is checked by identity on every call, and the ABC isinstance checks
#: and `get_tracer` (which edits the warnings filters each time) run once per provider
_seen: tuple[Any, tuple[Any, Any] | None] = (None, None)


def _api() -> tuple[Any, Any] | None:
    """(`opentelemetry.trace`, judgehooks' tracer) when the application imported it and set a tracer
    provider, else None."""
    global _seen
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    seen = _seen
    if seen[0] is not provider:
        traces = not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
        seen = _seen = (provider, (trace, provider.get_tracer("judgehooks")) if traces else None)
    return seen[1]


def current_span() -> tuple[str, str, Any] | None:
    """At hook time: (trace id, span id, span) of the current span as lowercase hex, or None when
    tracing is off or no span is current."""
    api = _api()
    if api is None:
        return None
    span = api[0].get_current_span()
    found = span.get_span_context()
    if not found.is_valid:
        return None
    return format(found.trace_id, "032x"), format(found.span_id, "016x"), span


def holding(found: tuple[str, str, Any] | None) -> AbstractContextManager[None]:
    """While inline grading runs: records of this span's run put their event on the span itself."""
    return _NOT_HELD if found is None else _Hold(found[1], found[2])


class _Hold:
    """`holding`'s context manager: a class, not a generator, since it runs on every inline hook."""

    __slots__ = ("span", "span_id")

    def __init__(self, span_id: str, span: Any) -> None:
        self.span_id, self.span = span_id, span

    def __enter__(self) -> None:
        with _lock:
            held = _held.get(self.span_id)
            _held[self.span_id] = (self.span, 1 if held is None else held[1] + 1)

    def __exit__(self, *exc: object) -> None:
        with _lock:
            _, count = _held.pop(self.span_id, (self.span, 1))
            if count > 1:
                _held[self.span_id] = (self.span, count - 1)


_NOT_HELD = nullcontext()


def event_attributes(record: EvalRecord) -> dict[str, Any]:
    """The semantic conventions' attributes of one record's event, plus the record's id."""
    attributes: dict[str, Any] = {"gen_ai.evaluation.name": record.evaluator, "judgehooks.record.id": record.id}
    if record.score is not None:
        attributes["gen_ai.evaluation.score.value"] = float(record.score)
    elif record.passed is not None:  # a pass/fail check: 1.0 or 0.0, as pydantic-evals reports a bool
        attributes["gen_ai.evaluation.score.value"] = 1.0 if record.passed else 0.0
    if record.passed is not None:
        attributes["gen_ai.evaluation.score.label"] = "pass" if record.passed else "fail"
    explanation = record.reason if record.status != "error" else record.error_message
    if explanation:
        attributes["gen_ai.evaluation.explanation"] = explanation
    if record.error_type:
        attributes["error.type"] = record.error_type
    if record.run_id:  # agno's id of the judged response
        attributes["gen_ai.response.id"] = record.run_id
    return attributes


def emit(records: Sequence[EvalRecord]) -> None:
    """One event per verdict or error record (none for `skipped`). Never raises: a tracing
    failure is logged, and the records are already stored."""
    api = _api()
    if api is None:
        return
    for record in records:
        if record.status == "skipped":
            continue
        try:
            _emit_one(*api, record)
        except Exception:
            log.exception("trace_event_failed", evaluator=record.evaluator, record_id=record.id)


def _emit_one(trace: Any, tracer: Any, record: EvalRecord) -> None:
    attributes = event_attributes(record)
    held = _held.get(record.span_id) if record.span_id is not None else None
    if held is not None and held[0].is_recording():
        held[0].add_event(EVENT, attributes)
        return
    parent, links = None, None
    if record.trace_id is not None and record.span_id is not None:
        judged = trace.SpanContext(int(record.trace_id, 16), int(record.span_id, 16), is_remote=True,
                                   trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
        parent, links = trace.set_span_in_context(trace.NonRecordingSpan(judged)), [trace.Link(judged)]
    span = tracer.start_span(SPAN_NAME, context=parent, links=links,
                             attributes={"gen_ai.evaluation.name": record.evaluator})
    try:
        span.add_event(EVENT, attributes)
    finally:
        span.end()
