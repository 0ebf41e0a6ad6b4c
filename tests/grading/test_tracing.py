"""Verdicts in the user's traces: the `gen_ai.evaluation.result` event, read from the OpenTelemetry
SDK's in-memory exporter (exact attribute names), inline, in the background and from a Redis worker;
and nothing at all without OpenTelemetry."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel tests need opentelemetry-sdk (the dev extra)")

from _tracing import exported, provider  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks import SQLiteStore  # noqa: E402
from judgehooks._base.context import context_from_dict, context_to_dict  # noqa: E402
from judgehooks._grading.tracing import EVENT, SPAN_NAME  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RUN_SPAN = "support_bot.run"  # as openinference-instrumentation-agno names it; here the test opens it


def hex_ids(span) -> tuple[str, str]:
    ctx = span.get_span_context() if hasattr(span, "get_span_context") else span.context
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def run_in_span(agent, question: str):
    """agent.run inside a span, as an instrumented agno run is: its post hooks run inside it."""
    with provider().get_tracer("test").start_as_current_span(RUN_SPAN) as span:
        out = agent.run(question)
    return out, span


def evaluation_events(span) -> list[dict]:
    return [dict(e.attributes) for e in span.events if e.name == EVENT]


def test_inline_verdict_is_an_event_on_the_run_span_with_the_semconv_attributes(make_judge, make_agent, tmp_path):
    store = SQLiteStore(str(tmp_path / "evals.db"))
    judge = make_judge(name="helpful", store=store, scoring_strategy="numeric", threshold=7)
    with exported() as spans:
        out, span = run_in_span(make_agent(judge), "What is 2+2? [[score=9]] [[reason=Correct%20and%20brief]]")
    [record] = store.query_sync()
    [run] = [s for s in spans.get_finished_spans() if s.name == RUN_SPAN]
    assert evaluation_events(run) == [{
        "gen_ai.evaluation.name": "helpful",
        "gen_ai.evaluation.score.value": 9.0,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "Correct and brief",
        "gen_ai.response.id": out.run_id,
        "judgehooks.record.id": record.id,
    }]
    assert (record.trace_id, record.span_id) == hex_ids(span)  # stored: the record leads to its trace
    assert not [s for s in spans.get_finished_spans() if s.name == SPAN_NAME]  # no extra span inline


def test_a_failed_binary_verdict_reports_score_zero_and_label_fail(make_judge, make_agent, store):
    judge = make_judge(name="echoes")
    with exported() as spans:
        out, _ = run_in_span(make_agent(judge), "q [[fail]] [[reason=Does%20not%20echo]]")
    [run] = [s for s in spans.get_finished_spans() if s.name == RUN_SPAN]
    [event] = evaluation_events(run)
    assert store.records[0].status == "failed"
    assert (event["gen_ai.evaluation.score.value"], event["gen_ai.evaluation.score.label"]) == (0.0, "fail")
    assert event["gen_ai.evaluation.explanation"] == "Does not echo"


def test_a_judge_error_emits_error_type_and_no_score(make_judge, make_agent, store):
    judge = make_judge(name="helpful", retries=0)
    with exported() as spans:
        out, _ = run_in_span(make_agent(judge), "q [[judge_status=500]]")
    [record] = store.records
    [run] = [s for s in spans.get_finished_spans() if s.name == RUN_SPAN]
    [event] = evaluation_events(run)
    assert record.status == "error" and record.error_type
    assert event == {"gen_ai.evaluation.name": "helpful", "error.type": record.error_type,
                     "gen_ai.evaluation.explanation": record.error_message, "gen_ai.response.id": out.run_id,
                     "judgehooks.record.id": record.id}


def test_async_runs_put_the_event_on_their_own_span(make_judge, make_agent, store):
    judge = make_judge(name="helpful")
    agent = make_agent(judge)

    async def two_runs():
        tracer = provider().get_tracer("test")

        async def one(q):
            with tracer.start_as_current_span(RUN_SPAN) as span:
                return await agent.arun(q), span

        return await asyncio.gather(one("first"), one("second"))

    with exported() as spans:
        results = asyncio.run(two_runs())
    by_id = {s.context.span_id: s for s in spans.get_finished_spans() if s.name == RUN_SPAN}
    for out, span in results:
        [event] = evaluation_events(by_id[span.get_span_context().span_id])
        assert event["gen_ai.response.id"] == out.run_id  # each verdict on the span of the run it judged


def test_background_verdict_is_an_event_on_a_short_span_linked_to_the_ended_run_span(
        make_judge, make_agent, store, tmp_path, server):
    server.configure(judge_delay_ms=200)  # the run's span has ended long before the verdict
    judge = make_judge(name="helpful", run_in_background=True, outbox=str(tmp_path / "outbox.db"),
                       scoring_strategy="numeric", threshold=7)
    with exported() as spans:
        out, span = run_in_span(make_agent(judge), "q [[score=8]]")
        assert store.records == []
        assert judgehooks.drain(30)
    [record] = store.records
    finished = spans.get_finished_spans()
    [run] = [s for s in finished if s.name == RUN_SPAN]
    [short] = [s for s in finished if s.name == SPAN_NAME]
    assert evaluation_events(run) == []  # it had ended: nothing can be added to it
    assert short.context.trace_id == run.context.trace_id  # the same trace
    assert short.parent.span_id == run.context.span_id  # a child of the judged run's span
    assert [(link.context.trace_id, link.context.span_id) for link in short.links] == [
        (run.context.trace_id, run.context.span_id)]  # and linked to it
    assert evaluation_events(short) == [{
        "gen_ai.evaluation.name": "helpful", "gen_ai.evaluation.score.value": 8.0,
        "gen_ai.evaluation.score.label": "pass", "gen_ai.evaluation.explanation": record.reason,
        "gen_ai.response.id": out.run_id, "judgehooks.record.id": record.id}]
    assert (record.trace_id, record.span_id) == hex_ids(span)


def test_shed_runs_emit_no_event(make_judge, make_agent, store, tmp_path, server):
    server.configure(judge_delay_ms=300)
    judge = make_judge(name="helpful", run_in_background=True, outbox=str(tmp_path / "outbox.db"), max_queue=1,
                       max_concurrency=1)
    agent = make_agent(judge)
    with exported() as spans:
        for i in range(6):
            run_in_span(agent, f"q{i}")
        assert judgehooks.drain(30)
    graded = [r for r in store.records if r.status != "skipped"]
    shed = [r for r in store.records if r.status == "skipped"]
    assert len(store.records) == 6 and shed and graded
    events = [e for s in spans.get_finished_spans() for e in evaluation_events(s)]
    assert sorted(e["judgehooks.record.id"] for e in events) == sorted(r.id for r in graded)


def test_a_run_outside_any_span_is_graded_into_a_trace_of_its_own(make_judge, make_agent, store):
    judge = make_judge(name="helpful")
    with exported() as spans:
        make_agent(judge).run("q")
    [record] = store.records
    [short] = spans.get_finished_spans()
    assert record.trace_id is None and short.name == SPAN_NAME and short.parent is None
    assert [e["judgehooks.record.id"] for e in evaluation_events(short)] == [record.id]



@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sqlite", "postgres", "jsonl", "memory", "agno"])
async def test_every_store_keeps_the_trace_and_span_ids(kind, tmp_path, request):
    from agno.db.sqlite import SqliteDb

    from judgehooks import AgnoDbStore, EvalRecord, JsonlStore, MemoryStore, PostgresStore

    record = EvalRecord(id="r-1", status="passed", evaluator="e", mode="binary", passed=True, agent_id="a",
                        trace_id="0af7651916cd43dd8448eb211c80319c", span_id="b7ad6b7169203331")
    if kind == "agno":
        db = SqliteDb(db_file=str(tmp_path / "agno.db"))
        await AgnoDbStore(db).write([record])
        [run] = db.get_eval_runs(agent_id="a")
        ours = run.eval_data["judgehooks"]["record"]
        assert (ours["trace_id"], ours["span_id"]) == (record.trace_id, record.span_id)
        return
    store = {"sqlite": lambda: SQLiteStore(tmp_path / "evals.db"), "jsonl": lambda: JsonlStore(tmp_path / "e.jsonl"),
             "memory": MemoryStore, "postgres": lambda: PostgresStore(request.getfixturevalue("postgres_dsn"))}[kind]()
    await store.write([record])
    [back] = await store.query()
    assert (back.trace_id, back.span_id) == (record.trace_id, record.span_id)
    await store.aclose()

def test_trace_ids_travel_in_jobs_and_forged_ones_are_dropped():
    ctx = context_from_dict({"input": "q", "output": "a", "trace_id": "0af7651916cd43dd8448eb211c80319c",
                             "span_id": "b7ad6b7169203331"})
    assert context_from_dict(context_to_dict(ctx)) == ctx and ctx.span_id == "b7ad6b7169203331"
    for trace_id, span_id in [("0af7651916cd43dd8448eb211c80319c", "\x1b[31mred\x1b[0m  "),
                              ("0" * 32, "b7ad6b7169203331"), ("0AF7651916CD43DD8448EB211C80319C", "b7ad6b7169203331"),
                              (12, 34), ("0af7651916cd43dd8448eb211c80319c", None)]:
        forged = context_from_dict({"input": "q", "output": "a", "trace_id": trace_id, "span_id": span_id})
        assert (forged.trace_id, forged.span_id) == (None, None)
    old = context_from_dict({"input": "q", "output": "a"})  # a job written before the fields existed
    assert (old.trace_id, old.span_id) == (None, None)


def test_a_redis_worker_emits_on_a_span_linked_to_the_producers_run(make_judge, make_agent, tmp_path, server,
                                                                    redis_base, monkeypatch):
    import redis

    from judgehooks._evaluators.spec import JobRebuild
    from judgehooks._grading.redis.worker import Worker

    monkeypatch.setenv("JUDGEHOOKS_JOB_KEY", "test-job-signing-key-0123456789abcdef")  # jobs are signed
    client = redis.Redis.from_url(redis_base)
    client.flushdb()
    client.close()
    producer = make_judge(name="helpful", run_in_background=True, broker=redis_base,
                          outbox=str(tmp_path / "producer.outbox.db"))
    with exported() as spans:
        out, span = run_in_span(make_agent(producer), "q [[score=9]]")
        assert judgehooks.drain(30)
        store = judgehooks.MemoryStore()
        worker = Worker(redis_base, store, reclaim_after=2,
                        rebuild=JobRebuild(allow=frozenset({"AgentAsJudgeEval"}), model="openai/judge",
                                           api_base=server.base_url))

        async def serve() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(worker.serve(stop))
            for _ in range(600):
                if store.records or task.done():
                    break
                await asyncio.sleep(0.05)
            stop.set()
            await asyncio.wait_for(task, 30)

        asyncio.run(serve())
    [record] = store.records
    assert (record.trace_id, record.span_id) == hex_ids(span)
    [short] = [s for s in spans.get_finished_spans() if s.name == SPAN_NAME]
    assert (short.context.trace_id, short.parent.span_id) == (span.get_span_context().trace_id,
                                                              span.get_span_context().span_id)
    assert evaluation_events(short)[0]["judgehooks.record.id"] == record.id


# ---- without OpenTelemetry ------------------------------------------------------------------------

WITHOUT_OTEL = textwrap.dedent("""
    import json, os, sys
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    BLOCK = os.environ["BLOCK"] == "1"

    class Blocker:  # opentelemetry is not installed, as far as this process can tell
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    if BLOCK:
        sys.meta_path.insert(0, Blocker())
    else:  # installed and imported, but no tracer provider set: still nothing to emit
        from opentelemetry import trace
        trace.get_tracer("app").start_span("unconfigured").end()
    from agno.agent import Agent
    from agno.models.openai.like import OpenAILike
    import judgehooks
    from judgehooks import AgentAsJudgeEval, MemoryStore

    base = sys.argv[1]
    store = MemoryStore()
    inline = AgentAsJudgeEval(name="inline", criteria="c", model="openai/judge", api_base=base, api_key="k",
                              store=store)
    background = AgentAsJudgeEval(name="background", criteria="c", model="openai/judge", api_base=base,
                                  api_key="k", store=store, run_in_background=True, outbox=False)
    Agent(model=OpenAILike(id="agent", base_url=base, api_key="k"), post_hooks=[inline, background],
          telemetry=False).run("q")
    assert judgehooks.drain(30)
    print(json.dumps({"statuses": sorted(r.status for r in store.records),
                      "ids": [[r.trace_id, r.span_id] for r in store.records],
                      "otel_modules": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}))
""")


@pytest.mark.slow
@pytest.mark.parametrize("block", [True, False], ids=["not-installed", "no-tracer-provider"])
def test_without_opentelemetry_nothing_is_imported_and_records_are_as_before(server, block):
    env = {**os.environ, "BLOCK": "1" if block else "0", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", WITHOUT_OTEL, server.base_url], capture_output=True, text=True,
                          timeout=240, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["statuses"] == ["passed", "passed"] and seen["ids"] == [[None, None], [None, None]]
    if block:
        assert seen["otel_modules"] == []  # judgehooks imported none of it
    else:
        assert "opentelemetry.sdk" not in " ".join(seen["otel_modules"])



def test_offline_grading_puts_each_event_on_a_span_of_its_own(make_judge, store):
    judge = make_judge(name="helpful")
    with exported() as spans:
        result = judge.run(cases=[{"input": "q1", "output": "a1"}, {"input": "q2", "output": "a2"}])
    assert result.graded_count == 2 and all(r.trace_id is None for r in store.records)
    shorts = [s for s in spans.get_finished_spans() if s.name == SPAN_NAME]
    assert len(shorts) == 2 and all(s.parent is None for s in shorts)
    assert sorted(e["judgehooks.record.id"] for s in shorts for e in evaluation_events(s)) == sorted(
        r.id for r in store.records)


# ---- the docs' comparison: what agno and pydantic-evals do with the same tracer provider -----------

def test_agnos_own_judge_emits_no_evaluation_event(make_agent, server):
    from agno.eval import AgentAsJudgeEval as AgnoEval
    from conftest import model

    judged = []
    agno_judge = AgnoEval(criteria="The answer echoes the question.", model=model(server), telemetry=False,
                          on_fail=judged.append)
    with exported() as spans:
        run_in_span(make_agent(agno_judge), "q")
    assert server.settings.counts["judge"] + server.settings.counts["agent"] >= 2  # the judge was called
    assert [e for s in spans.get_finished_spans() for e in s.events if e.name == EVENT] == []


def test_pydantic_evals_emits_the_event_as_a_log_record_not_on_the_span():
    pytest.importorskip("pydantic_evals", reason="the comparison needs pydantic-evals (the dev extra)")
    from opentelemetry._logs import get_logger_provider, set_logger_provider
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from pydantic_evals.evaluators import Evaluator, EvaluatorContext
    from pydantic_evals.online import evaluate, wait_for_evaluations

    logs = InMemoryLogRecordExporter()
    if not isinstance(get_logger_provider(), LoggerProvider):
        set_logger_provider(LoggerProvider())
    get_logger_provider().add_log_record_processor(SimpleLogRecordProcessor(logs))

    class NonEmpty(Evaluator):
        def evaluate(self, ctx: EvaluatorContext) -> bool:
            return bool(ctx.output)

    @evaluate(NonEmpty())
    async def answer(question: str) -> str:
        return "an answer"

    async def call() -> None:
        await answer("q")
        await wait_for_evaluations(timeout=10)

    with exported() as spans:
        asyncio.run(call())
    finished = spans.get_finished_spans()
    [emitted] = [r.log_record for r in logs.get_finished_logs() if r.log_record.event_name == EVENT]
    [call_span] = [s for s in finished if s.context.span_id == emitted.span_id]  # parented to the call's span
    assert [e for s in finished for e in s.events if e.name == EVENT] == []  # and not a span event
    assert emitted.attributes["gen_ai.evaluation.score.label"] == "pass" and call_span.name
