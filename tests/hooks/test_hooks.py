"""Real agno Agents and Teams, graded through real litellm over HTTP to the loopback server."""

from __future__ import annotations

import asyncio
import threading

import pytest
from pydantic import BaseModel

from judgehooks import EvalRecord


def only(store, **filters) -> EvalRecord:
    records = [r for r in store.records if all(getattr(r, k) == v for k, v in filters.items())]
    assert len(records) == 1, records
    return records[0]


# ---- verdicts and thresholds ------------------------------------------------------------------

@pytest.mark.parametrize(("score", "status"), [(7, "passed"), (6, "failed"), (10, "passed"), (1, "failed")])
def test_numeric_threshold_boundary_sync(make_judge, make_agent, store, score, status):
    agent = make_agent(make_judge(scoring_strategy="numeric", threshold=7))
    out = agent.run(f"question [[score={score}]]")
    record = only(store, run_id=out.run_id)
    assert (record.status, record.score, record.threshold, record.mode) == (status, score, 7, "numeric")
    assert record.passed is (status == "passed")


@pytest.mark.anyio
@pytest.mark.parametrize(("score", "status"), [(5, "passed"), (4, "failed")])
async def test_numeric_threshold_boundary_async(make_judge, make_agent, store, score, status):
    agent = make_agent(make_judge(scoring_strategy="numeric", threshold=5))
    out = await agent.arun(f"question [[score={score}]]")
    assert only(store, run_id=out.run_id).status == status


@pytest.mark.parametrize("directive, status", [("", "passed"), ("[[fail]]", "failed")])
def test_binary_verdicts(make_judge, make_agent, store, directive, status):
    agent = make_agent(make_judge())
    out = agent.run(f"question {directive}")
    record = only(store, run_id=out.run_id)
    assert record.status == status and record.score is None and record.threshold is None
    assert record.reason.startswith("stub judge says")


def test_record_carries_ids_tokens_and_texts(make_judge, make_agent, store):
    agent = make_agent(make_judge(name="helpful"), name="helper", id="agent-1")
    out = agent.run("what is up [[score=9]]", session_id="s-1", user_id="u-1")
    r = only(store, run_id=out.run_id)
    assert (r.agent_id, r.agent_name, r.session_id, r.user_id, r.evaluator) == ("agent-1", "helper", "s-1", "u-1",
                                                                                "helpful")
    assert r.input == "what is up [[score=9]]" and r.output == out.content
    assert r.prompt_tokens > 0 and r.completion_tokens > 0 and r.attempts == 1 and r.latency_ms > 0
    assert r.judge_model and r.cost_usd is None  # litellm knows no price for the stub model


def test_record_id_is_deterministic(make_judge, make_agent, store):
    from judgehooks._base.record import record_id

    judge = make_judge(name="det")
    out = make_agent(judge).run("hello")
    assert only(store, run_id=out.run_id).id == record_id("det", out.run_id, version=judge.evaluator_version)


def test_unnamed_judges_differing_only_in_model_each_keep_their_verdicts(make_judge, make_agent, store):
    first, second = make_judge(), make_judge(model="openai/judge-b")  # two judge models compared
    assert first.evaluator_name == second.evaluator_name  # unnamed, same criteria: the same name
    agent = make_agent(first, second)
    runs = [agent.run(f"question {i}").run_id for i in range(3)]
    assert sorted((r.run_id, r.evaluator_version) for r in store.records) == sorted(
        (run, judge.evaluator_version) for run in runs for judge in (first, second))
    assert len({r.id for r in store.records}) == 6


def test_the_same_judge_twice_on_one_run_stores_one_record(make_judge, make_agent, store):
    judge = make_judge()
    out = make_agent(judge, judge).run("question")
    again = make_judge()  # built afresh with the same settings: the same evaluator, the same id
    make_agent(again).run("question")
    assert again.evaluator_version == judge.evaluator_version
    assert [r.run_id for r in store.records].count(out.run_id) == 1


def test_pydantic_output_is_judged_as_json(make_judge, make_agent, store, server):
    class Answer(BaseModel):
        text: str

    # The stub answers structured-output requests for the agent with ECHO text, which agno cannot
    # parse into Answer; use a parser-free path instead: the hook sees whatever content agno built.
    agent = make_agent(make_judge(), output_schema=Answer, parse_response=False, use_json_mode=True)
    out = agent.run('{"text": "hi"}')
    record = only(store, run_id=out.run_id)
    assert record.output == (out.content.model_dump_json() if isinstance(out.content, BaseModel) else out.content)


# ---- callbacks, both paths, both first-call orders ----------------------------------------------

def _collector():
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def sync_cb(record: EvalRecord) -> None:
        with lock:
            seen.append(("sync", record.status))

    async def async_cb(record: EvalRecord) -> None:
        with lock:
            seen.append(("async", record.status))

    return seen, sync_cb, async_cb


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("first", ["run", "arun"])
def test_callbacks_fire_in_both_paths_whichever_ran_first(make_judge, make_agent, store, kind, first):
    seen, sync_cb, async_cb = _collector()
    cb = sync_cb if kind == "sync" else async_cb
    agent = make_agent(make_judge(on_fail=cb, on_error=cb))

    async def arun(prompt):
        return await agent.arun(prompt)

    def run_both():
        fail_prompt, error_prompt = "q [[fail]]", "q [[judge_status=500]]"
        if first == "run":
            agent.run(fail_prompt)
            agent.run(error_prompt)
            asyncio.run(arun(fail_prompt))
            asyncio.run(arun(error_prompt))
        else:
            asyncio.run(arun(fail_prompt))
            asyncio.run(arun(error_prompt))
            agent.run(fail_prompt)
            agent.run(error_prompt)

    # agno caches an async OpenAI client per agent; a fresh loop per arun needs a fresh client.
    agent.model.async_client = None
    run_both_safely(agent, run_both)
    assert sorted(seen) == sorted([(kind, "failed"), (kind, "error")] * 2)
    assert sorted(r.status for r in store.records) == ["error", "error", "failed", "failed"]


def run_both_safely(agent, fn):
    """agno's OpenAIChat keeps one async client across asyncio.run() loops; clear it per loop."""
    original = asyncio.run

    def patched(coro):
        agent.model.async_client = None
        agent.model.http_client = None
        return original(coro)

    asyncio.run = patched
    try:
        fn()
    finally:
        asyncio.run = original


def test_arun_first_then_run_still_grades(make_judge, make_agent, store):
    agent = make_agent(make_judge())
    asyncio.run(agent.arun("first"))
    for i in range(3):
        agent.run(f"later {i}")
    assert len(store.records) == 4


@pytest.mark.anyio
async def test_run_first_then_arun_does_not_block_the_loop(make_judge, make_agent, store, server):
    agent = make_agent(make_judge())
    await asyncio.to_thread(agent.run, "first")
    server.configure(judge_delay_ms=300)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.gather(*(agent.arun(f"q{i}") for i in range(4)))
    task.cancel()
    assert len(store.records) == 5
    assert ticks >= 10  # the loop kept turning while four 300 ms verdicts were awaited


def test_a_raising_callback_changes_nothing(make_judge, make_agent, store):
    calls = []

    def boom(record):
        calls.append(record.id)
        raise RuntimeError("pager is down")

    from structlog.testing import capture_logs

    agent = make_agent(make_judge(on_fail=boom))
    with capture_logs() as logs:
        out = agent.run("q [[fail]]")
    assert out.content.startswith("ECHO") and out.status.value == "COMPLETED"
    assert only(store, run_id=out.run_id).status == "failed" and len(calls) == 1
    failure = [e for e in logs if e["event"] == "callback_failed"]
    assert failure and failure[0]["callback"] == "on_fail" and "RuntimeError: pager is down" in failure[0]["exception"]


# ---- judge errors become error records ----------------------------------------------------------

@pytest.mark.parametrize("directive, error_type", [
    ("[[judge_status=500]]", "InternalServerError"),
    ("[[judge_status=429]]", "RateLimitError"),
    ("[[judge_malformed]]", "MalformedVerdict"),
])
def test_judge_errors_are_error_records_never_failures(make_judge, make_agent, store, directive, error_type):
    errors = []
    agent = make_agent(make_judge(retries=2, on_error=errors.append, on_fail=lambda r: errors.append("FAIL")))
    out = agent.run(f"q {directive}")
    r = only(store, run_id=out.run_id)
    assert (r.status, r.passed, r.error_type, r.attempts) == ("error", None, error_type, 3)
    assert r.error_message and errors == [r]


def test_judge_timeout_is_an_error_record(make_judge, make_agent, store):
    agent = make_agent(make_judge(timeout=0.2, retries=1))
    out = agent.run("q [[judge_delay=1000]]")
    r = only(store, run_id=out.run_id)
    assert r.status == "error" and r.attempts == 2 and "Timeout" in r.error_type


def test_outage_then_recovery_is_retried_to_a_verdict(make_judge, make_agent, store, server):
    server.configure(judge_fail_next=2, judge_fail_status=503)
    agent = make_agent(make_judge(retries=3))
    out = agent.run("q [[score=9]]")
    r = only(store, run_id=out.run_id)
    assert r.status == "passed" and r.attempts == 3


def test_server_without_structured_output_falls_back_to_text(make_judge, make_agent, store, server):
    server.configure(judge_structured=False)
    agent = make_agent(make_judge(scoring_strategy="numeric", threshold=5))
    out = agent.run("q [[score=4]]")
    r = only(store, run_id=out.run_id)
    assert (r.status, r.score) == ("failed", 4)


def test_judge_unreachable_is_an_error_record(make_agent, store):
    from judgehooks import AgentAsJudgeEval

    judge = AgentAsJudgeEval(criteria="c", model="openai/judge", api_base="http://127.0.0.1:9/v1", api_key="k",
                             store=store, retries=1, retry_backoff=0.01, timeout=5)
    out = make_agent(judge).run("q")
    r = only(store, run_id=out.run_id)
    assert r.status == "error" and r.error_type in {"InternalServerError", "APIConnectionError"}


def test_mixed_batch_of_runs_loses_nothing(make_judge, make_agent, store):
    agent = make_agent(make_judge(retries=0))
    directives = ["", "[[fail]]", "[[judge_status=500]]", "[[judge_malformed]]"] * 5
    run_ids = [agent.run(f"q{i} {d}").run_id for i, d in enumerate(directives)]
    assert sorted(r.run_id for r in store.records) == sorted(run_ids)
    statuses = [r.status for r in store.records]
    assert statuses.count("passed") == 5 and statuses.count("failed") == 5 and statuses.count("error") == 10


# ---- concurrency ------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_200_concurrent_aruns_share_one_eval(make_judge, make_agent, store, server):
    server.configure(judge_delay_ms=20)
    judge = make_judge(scoring_strategy="numeric")
    agent = make_agent(judge, id="shared-agent")
    outs = await asyncio.gather(*(agent.arun(f"q{i} [[score={1 + i % 10}]]") for i in range(200)))
    assert len(store.records) == 200
    for out in outs:
        r = only(store, run_id=out.run_id)
        assert r.agent_id == "shared-agent" and r.input == out.input.input_content_string()
        assert r.score == int(r.input.split("score=")[1].split("]")[0])


def test_threads_share_one_eval(make_judge, make_agent, store):
    judge = make_judge()
    agents = [make_agent(judge, id=f"agent-{i}") for i in range(8)]
    results: list = []

    def worker(agent):
        for j in range(5):
            results.append((agent.id, agent.run(f"{agent.id} q{j}").run_id))

    threads = [threading.Thread(target=worker, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.records) == 40
    for agent_id, run_id in results:
        assert only(store, run_id=run_id).agent_id == agent_id


# ---- teams and streaming ------------------------------------------------------------------------

def test_team_post_hook_records_team_ids(make_judge, make_team, store):
    team = make_team(make_judge(), name="Support", id="team-1")
    out = team.run("team q [[fail]]")
    r = only(store, run_id=out.run_id)
    assert (r.team_id, r.team_name, r.agent_id, r.status) == ("team-1", "Support", None, "failed")


@pytest.mark.anyio
async def test_team_async_post_hook(make_judge, make_team, store):
    team = make_team(make_judge(), name="Support", id="team-2")
    out = await team.arun("team q")
    assert only(store, run_id=out.run_id).team_id == "team-2"


def test_streaming_run_is_graded(make_judge, make_agent, store):
    agent = make_agent(make_judge())
    chunks = list(agent.run("stream me [[fail]]", stream=True))
    assert chunks
    [r] = store.records
    assert r.status == "failed" and r.output == "ECHO: stream me [[fail]]"


@pytest.mark.anyio
async def test_async_streaming_run_is_graded(make_judge, make_agent, store):
    agent = make_agent(make_judge())
    async for _ in agent.arun("stream me async", stream=True):
        pass
    [r] = store.records
    assert r.status == "passed" and r.output == "ECHO: stream me async"


def test_tool_calls_reach_the_judge_when_asked(make_judge, make_agent, store, server):
    def lookup(text: str) -> str:
        """Look something up."""
        return "LOOKED-UP"

    judge = make_judge(include_tool_calls=True)
    agent = make_agent(judge, tools=[lookup])
    out = agent.run("use a tool [[tool=lookup]]")
    assert "TOOL_RESULT: LOOKED-UP" in out.content
    assert only(store, run_id=out.run_id).status == "passed"
    from judgehooks._hooks.snapshot import snapshot_run

    ctx = snapshot_run(out, with_tools=True)
    assert [c.name for c in ctx.tool_calls] == ["lookup"] and ctx.tool_calls[0].result == "LOOKED-UP"
