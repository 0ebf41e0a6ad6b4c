"""The OpenTelemetry SDK for tests: one global tracer provider per test process (OpenTelemetry lets
a process set it once), whose span processors a test plugs in and out."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

PROJECT = "judgehooks-tests"  # the project Phoenix files these spans under


class Switchboard(SpanProcessor):
    """Forwards spans to the processors plugged in now."""

    def __init__(self) -> None:
        self.processors: list[SpanProcessor] = []

    def on_start(self, span: Span, parent_context=None) -> None:
        for processor in list(self.processors):
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for processor in list(self.processors):
            processor.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(p.force_flush(timeout_millis) for p in list(self.processors))


_switchboard = Switchboard()


def provider() -> TracerProvider:
    """The process's tracer provider, set on first use."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    made = TracerProvider(resource=Resource.create({"service.name": "judgehooks-tests",
                                                    "openinference.project.name": PROJECT}))
    made.add_span_processor(_switchboard)
    trace.set_tracer_provider(made)
    return made


@contextmanager
def plugged(processor: SpanProcessor) -> Iterator[SpanProcessor]:
    provider()
    _switchboard.processors.append(processor)
    try:
        yield processor
    finally:
        processor.force_flush()
        _switchboard.processors.remove(processor)


@contextmanager
def exported() -> Iterator[InMemorySpanExporter]:
    """The spans that end inside the block, in memory."""
    exporter = InMemorySpanExporter()
    with plugged(SimpleSpanProcessor(exporter)):
        yield exporter
