"""Logfire: pydantic's SDK configured the way docs/how-to/opentelemetry.md tells users to, plus
`send_to_logfire=False` and an in-memory exporter in place of Logfire's servers. An agno agent
instrumented by openinference runs with an inline and a background judge; the spans Logfire's
processors receive must carry each verdict's `gen_ai.evaluation.result` event in the run's trace.

`logfire.configure` sets the process's global tracer provider (once per process), so the run happens
in a child process. logfire is not in the dev extra: installed next to pydantic, it registers a
pydantic plugin (imported with every process's first model) and takes over `logfire-api`, which
changes how pydantic-evals emits in the comparison tests. The child finds it on
`$JUDGEHOOKS_TEST_LOGFIRE_PATH` (`pip install --target DIR logfire`, as .ci/run does) or installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from judgehooks._grading.tracing import EVENT, SPAN_NAME

ROOT = Path(__file__).resolve().parents[2]
LOGFIRE_PATH = os.environ.get("JUDGEHOOKS_TEST_LOGFIRE_PATH", "")

if not (LOGFIRE_PATH and (Path(LOGFIRE_PATH) / "logfire").is_dir()) and importlib.util.find_spec("logfire") is None:
    if os.environ.get("CI") == "true":  # .ci/run installs it: there, missing is a failure
        raise ImportError("logfire is not installed and $JUDGEHOOKS_TEST_LOGFIRE_PATH names no logfire install")
    pytest.skip("needs logfire (pip install --target DIR logfire; JUDGEHOOKS_TEST_LOGFIRE_PATH=DIR)",
                allow_module_level=True)
if importlib.util.find_spec("openinference.instrumentation.agno") is None:
    pytest.skip("needs openinference-instrumentation-agno (the dev extra)", allow_module_level=True)

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent("""
    import json, os, sys
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()  # the test's stand-in for Logfire's servers

    # -- the docs' setup (docs/how-to/opentelemetry.md, "Logfire"), with what the test adds marked --
    import logfire
    from openinference.instrumentation.agno import AgnoInstrumentor

    logfire.configure(
        service_name="support-bot",
        send_to_logfire=False,  # test: no account, no network
        console=False,  # test: keep stdout for the result
        additional_span_processors=[SimpleSpanProcessor(exporter)],  # test: read the spans back
    )
    AgnoInstrumentor().instrument()  # the agent runs' spans, on Logfire's (now global) tracer provider
    # -- end of the docs' setup --

    from agno.agent import Agent
    from agno.models.openai.like import OpenAILike

    import judgehooks
    from judgehooks import AgentAsJudgeEval, MemoryStore

    base = sys.argv[1]
    store = MemoryStore()
    common = dict(model="openai/judge", api_base=base, api_key="k", store=store, timeout=10)
    inline = AgentAsJudgeEval(name="helpful", criteria="c", scoring_strategy="numeric", threshold=7, **common)
    background = AgentAsJudgeEval(name="grounded", criteria="c", run_in_background=True, outbox=False, **common)
    agent = Agent(name="support-bot", model=OpenAILike(id="agent", base_url=base, api_key="k"),
                  post_hooks=[inline, background], telemetry=False)
    out = agent.run("What is 2+2? [[score=9]] [[reason=Right]]")
    assert judgehooks.drain(120)  # a busy machine: the background judge's first call starts its helper
    logfire.force_flush()

    def hex_id(value):
        return None if value is None else format(value, "016x")

    print(json.dumps({
        "run_id": out.run_id,
        "records": [{"evaluator": r.evaluator, "id": r.id, "status": r.status, "trace_id": r.trace_id,
                     "span_id": r.span_id} for r in store.records],
        "spans": [{"name": s.name, "trace_id": format(s.context.trace_id, "032x"),
                   "span_id": hex_id(s.context.span_id), "parent": hex_id(s.parent and s.parent.span_id),
                   "links": [hex_id(link.context.span_id) for link in s.links],
                   "events": [{"name": e.name, "attributes": dict(e.attributes)} for e in s.events]}
                  for s in exporter.get_finished_spans()],
    }))
""")


@pytest.fixture(scope="module")
def logfire_run(server) -> dict:
    """One instrumented run under Logfire's SDK in a child process: its records and finished spans."""
    path = os.pathsep.join(p for p in (str(ROOT), LOGFIRE_PATH, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    for name in [n for n in env if n.startswith(("LOGFIRE_", "OTEL_"))]:  # the test's settings only
        del env[name]
    server.reset()
    done = subprocess.run([sys.executable, "-c", CHILD, server.base_url], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _events(span: dict) -> list[dict]:
    return [e["attributes"] for e in span["events"] if e["name"] == EVENT]


def test_logfire_receives_the_inline_verdict_on_the_agent_run_span(logfire_run):
    [record] = [r for r in logfire_run["records"] if r["evaluator"] == "helpful"]
    assert record["status"] == "passed" and record["trace_id"] and record["span_id"]
    [run] = [s for s in logfire_run["spans"] if s["span_id"] == record["span_id"]]
    assert run["name"] == "support_bot.run" and run["trace_id"] == record["trace_id"]  # openinference's run span
    assert _events(run) == [{"gen_ai.evaluation.name": "helpful", "gen_ai.evaluation.score.value": 9.0,
                             "gen_ai.evaluation.score.label": "pass", "gen_ai.evaluation.explanation": "Right",
                             "gen_ai.response.id": logfire_run["run_id"], "judgehooks.record.id": record["id"]}]


def test_logfire_receives_the_background_verdict_in_the_run_trace(logfire_run):
    [record] = [r for r in logfire_run["records"] if r["evaluator"] == "grounded"]
    assert record["status"] == "passed"
    [short] = [s for s in logfire_run["spans"] if s["name"] == SPAN_NAME]
    assert (short["trace_id"], short["parent"], short["links"]) == (
        record["trace_id"], record["span_id"], [record["span_id"]])  # a child of the run's span, linked to it
    [event] = _events(short)
    assert event["gen_ai.evaluation.name"] == "grounded" and event["judgehooks.record.id"] == record["id"]
    assert (event["gen_ai.evaluation.score.value"], event["gen_ai.evaluation.score.label"]) == (1.0, "pass")
    assert event["gen_ai.response.id"] == logfire_run["run_id"]
