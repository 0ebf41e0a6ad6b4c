"""A real trace receiver: Arize Phoenix, started here on 127.0.0.1, receives the spans of an agno agent
instrumented with openinference-instrumentation-agno; its HTTP API must show each run's trace carrying
the judge's `gen_ai.evaluation.result` event, graded inline and in the background."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

# Found, not imported: `import phoenix` takes tens of seconds; the server runs in its own process.
if importlib.util.find_spec("phoenix") is None or importlib.util.find_spec("openinference") is None:
    if os.environ.get("CI") == "true":  # CI installs the dev extra, which has both: there, missing is a failure
        raise ImportError("arize-phoenix and openinference-instrumentation-agno (the dev extra) are not installed")
    pytest.skip("needs arize-phoenix and openinference-instrumentation-agno (the dev extra)", allow_module_level=True)

from _tracing import PROJECT, plugged, provider  # noqa: E402
from openinference.instrumentation.agno import AgnoInstrumentor  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks._grading.tracing import EVENT, SPAN_NAME  # noqa: E402

pytestmark = pytest.mark.slow

STARTUP_S = 300  # Phoenix takes about a minute to start on two busy cores (imports, then its migrations)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory) -> str:
    """A Phoenix server on 127.0.0.1 with its own working directory (SQLite), stopped by PID."""
    port, grpc_port = free_port(), free_port()
    workdir = tmp_path_factory.mktemp("phoenix")
    env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc_port),
           "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = open(workdir / "phoenix.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "phoenix.server.main", "serve"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            try:
                get(f"{base}/v1/projects")
                break
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError, TimeoutError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    tail = (workdir / "phoenix.log").read_bytes()[-3000:].decode("utf-8", "replace")
                    raise AssertionError(f"Phoenix did not start (exit code {proc.poll()}):\n{tail}") from None
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


@pytest.fixture
def traced(phoenix):
    """The agno instrumentor and an OTLP/HTTP exporter to Phoenix, for one test."""
    instrumentor = AgnoInstrumentor()
    with plugged(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces", timeout=10))):
        instrumentor.instrument(tracer_provider=provider())
        try:
            yield phoenix
        finally:
            instrumentor.uninstrument()


def spans_of(phoenix: str, trace_id: str, until, timeout: float = 60.0) -> list[dict]:
    """The spans Phoenix holds for one trace, once `until(spans)` holds (ingestion is asynchronous)."""
    query = urllib.parse.urlencode({"trace_id": trace_id, "limit": 1000})
    deadline = time.monotonic() + timeout
    while True:
        spans = get(f"{phoenix}/v1/projects/{PROJECT}/spans?{query}")["data"] if _project(phoenix) else []
        if until(spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.25)


def _project(phoenix: str) -> bool:
    return PROJECT in {p["name"] for p in get(f"{phoenix}/v1/projects")["data"]}


def events(span: dict) -> list[dict]:
    return [e["attributes"] for e in span.get("events") or () if e["name"] == EVENT]


def test_phoenix_shows_an_inline_verdict_on_the_agent_run_span(traced, make_judge, make_agent, store):
    judge = make_judge(name="helpful", scoring_strategy="numeric", threshold=7)
    out = make_agent(judge, name="support-bot").run("What is 2+2? [[score=9]] [[reason=Right]]")
    [record] = store.records
    assert record.trace_id and record.span_id

    def run_span(spans: list[dict]) -> dict | None:
        return next((s for s in spans if s["context"]["span_id"] == record.span_id), None)

    spans = spans_of(traced, record.trace_id, lambda spans: run_span(spans) is not None)
    found = run_span(spans)
    assert found is not None, f"Phoenix has no span {record.span_id} in trace {record.trace_id}: {spans}"
    assert found["name"].endswith(".run") and found["span_kind"] == "AGENT"  # openinference's agent run span
    assert events(found) == [{"gen_ai.evaluation.name": "helpful", "gen_ai.evaluation.score.value": 9.0,
                              "gen_ai.evaluation.score.label": "pass", "gen_ai.evaluation.explanation": "Right",
                              "gen_ai.response.id": out.run_id, "judgehooks.record.id": record.id}]


def test_phoenix_shows_a_background_verdict_in_the_run_trace(traced, make_judge, make_agent, store, tmp_path):
    judge = make_judge(name="grounded", run_in_background=True, outbox=str(tmp_path / "outbox.db"))
    out = make_agent(judge, name="support-bot").run("q [[fail]] [[reason=Made%20up]]")
    assert judgehooks.drain(30)
    [record] = store.records
    assert record.status == "failed" and record.trace_id

    def short(spans: list[dict]) -> dict | None:
        return next((s for s in spans if s["name"] == SPAN_NAME), None)

    spans = spans_of(traced, record.trace_id,
                     lambda spans: short(spans) is not None and any(s["context"]["span_id"] == record.span_id
                                                                    for s in spans))
    run = next(s for s in spans if s["context"]["span_id"] == record.span_id)
    evaluation = short(spans)
    assert evaluation is not None, f"no {SPAN_NAME} span in trace {record.trace_id}: {spans}"
    assert run["name"].endswith(".run") and events(run) == []  # it had ended when the verdict came
    assert evaluation["parent_id"] == record.span_id  # the evaluation hangs under the judged run
    assert events(evaluation) == [{"gen_ai.evaluation.name": "grounded", "gen_ai.evaluation.score.value": 0.0,
                                   "gen_ai.evaluation.score.label": "fail", "gen_ai.evaluation.explanation": "Made up",
                                   "gen_ai.response.id": out.run_id, "judgehooks.record.id": record.id}]


def test_phoenix_takes_no_otlp_logs(phoenix):
    """Why judgehooks records span events: a log-based event (pydantic-evals') never reaches Phoenix."""
    request = urllib.request.Request(f"{phoenix}/v1/logs", data=b"", method="POST",
                                     headers={"content-type": "application/x-protobuf"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code in (404, 405)
    traces = urllib.request.Request(f"{phoenix}/v1/traces", data=b"", method="POST",
                                    headers={"content-type": "application/x-protobuf"})
    with urllib.request.urlopen(traces, timeout=10) as accepted:  # an empty export: the route exists
        assert accepted.status == 200
