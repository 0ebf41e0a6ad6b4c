"""Verdicts in your traces: each judge verdict as a `gen_ai.evaluation.result` event in the run's trace.

    pip install "judgehooks[otel]" opentelemetry-sdk openinference-instrumentation-agno \
        opentelemetry-exporter-otlp-proto-http
    python examples/traces.py                                  # prints the spans and their events
    python examples/traces.py http://127.0.0.1:6006/v1/traces  # also sends them to Phoenix (`phoenix serve`)

openinference-instrumentation-agno gives each agno run a `{Agent}.run` span. An inline judge adds its
event to that span; a background judge, which answers after the span has ended, adds it to a short
`judgehooks.evaluate` span under it, in the same trace. Uses the scripted loopback server (no key,
no network unless you name an OTLP endpoint).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import sys
from collections.abc import Sequence

from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from openinference.instrumentation.agno import AgnoInstrumentor
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import judgehooks
from judgehooks import AgentAsJudgeEval, MemoryStore
from judgehooks.testing import StubLLMServer


class PrintEvaluations(SpanExporter):
    """Prints each span that carries an evaluation event, with its place in the trace."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            self.names[span.context.span_id] = span.name
            for event in span.events:
                if event.name != "gen_ai.evaluation.result":
                    continue
                a = event.attributes or {}
                parent = self.names.get(span.parent.span_id, "?") if span.parent else None
                where = span.name if parent is None else f"{span.name} (child of {parent})"
                print(f"trace {span.context.trace_id:032x} span {where}: {a['gen_ai.evaluation.name']} "
                      f"label={a.get('gen_ai.evaluation.score.label')} score={a.get('gen_ai.evaluation.score.value')} "
                      f"explanation={a.get('gen_ai.evaluation.explanation')!r}")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(PrintEvaluations()))
if len(sys.argv) > 1:  # an OTLP/HTTP endpoint: Phoenix, a collector, Logfire (with its token header)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=sys.argv[1])))
trace.set_tracer_provider(provider)  # judgehooks emits through the global tracer provider
AgnoInstrumentor().instrument(tracer_provider=provider)

store = MemoryStore()
with StubLLMServer() as server:
    inline = AgentAsJudgeEval(name="helpful", criteria="Answers the question.", model="openai/judge",
                              api_base=server.base_url, api_key="no-key-needed", store=store,
                              scoring_strategy="numeric", threshold=7)
    background = AgentAsJudgeEval(name="grounded", criteria="States no made-up facts.", model="openai/judge",
                                  api_base=server.base_url, api_key="no-key-needed", store=store,
                                  run_in_background=True, outbox=False)
    agent = Agent(name="support-bot", model=OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed"),
                  post_hooks=[inline, background], telemetry=False)
    agent.run("How do I reset my password? [[score=9]] [[reason=Clear%20steps]]")
    judgehooks.drain(timeout=60)
    for record in sorted(store.records, key=lambda r: r.evaluator):
        print(f"record {record.evaluator}: {record.status}, trace_id={record.trace_id} span_id={record.span_id}")
provider.shutdown()
