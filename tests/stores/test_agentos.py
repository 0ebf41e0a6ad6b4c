"""Verdicts in AgentOS: an AgentOS app served over real HTTP lists what the evaluator wrote via db=."""

from __future__ import annotations

import httpx
import pytest
from _servers import serve

import judgehooks
from judgehooks import AgnoDbStore


def _agno_db(kind: str, tmp_path, request):
    if kind == "SqliteDb":
        from agno.db.sqlite import SqliteDb

        return SqliteDb(db_file=str(tmp_path / "agno.db"))
    if kind == "AsyncSqliteDb":
        from agno.db.sqlite import AsyncSqliteDb

        return AsyncSqliteDb(db_file=str(tmp_path / "agno-async.db"))
    dsn = request.getfixturevalue("postgres_dsn").replace("postgresql://", "postgresql+psycopg://", 1)
    if kind == "PostgresDb":
        from agno.db.postgres import PostgresDb

        return PostgresDb(db_url=dsn)
    from agno.db.postgres import AsyncPostgresDb

    return AsyncPostgresDb(db_url=dsn.replace("+psycopg://", "+psycopg_async://", 1))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["SqliteDb", "AsyncSqliteDb", "PostgresDb", "AsyncPostgresDb"])
def test_agentos_lists_every_verdict_with_agent_and_user(kind, make_judge, make_agent, store, tmp_path, request):
    from agno.os import AgentOS

    db = _agno_db(kind, tmp_path, request)
    judge = make_judge(db=db, run_in_background=True, outbox=str(tmp_path / "outbox.db"), scoring_strategy="numeric")
    agent = make_agent(judge, id="os-agent", name="os-agent")
    app = AgentOS(agents=[agent], db=db, telemetry=False).get_app()
    prompts = ["good [[score=9]]", "bad [[score=2]]", "broken [[judge_status=500]]"]
    with serve(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        for prompt in prompts:
            reply = client.post("/agents/os-agent/runs",
                                data={"message": prompt, "stream": "false", "user_id": "user-7"})
            assert reply.status_code == 200, reply.text
        # Each run's job was handed to our queue before its response left (agno calls our hook
        # inline, not as a FastAPI background task), and drain() returns once every record is
        # written to both stores (ours first, then agno's db): nothing left to wait for.
        assert judgehooks.drain(60)
        ours = sorted(r.status for r in store.records)
        assert ours == ["error", "failed", "passed"], [(r.id, r.status, r.error_type) for r in store.records]
        listed = client.get("/eval-runs", params={"agent_id": "os-agent", "limit": 50}).json()["data"]
        other = client.get("/eval-runs", params={"agent_id": "someone-else"}).json()["data"]
    by_status = {run["eval_data"]["judgehooks"]["record"]["status"]: run for run in listed}
    seen = [(run["id"], run["eval_data"]["judgehooks"]["record"]["status"]) for run in listed]
    assert sorted(by_status) == ["error", "failed", "passed"] and other == [], (seen, ours)
    assert {r.id for r in store.records} == {run["id"] for run in listed}  # same ids as our own store
    for run in listed:
        assert (run["agent_id"], run["user_id"], run["eval_type"]) == ("os-agent", "user-7", "agent_as_judge")
        # agno's row: the name given (none here) and no component name; ours names the agent in eval_data
        assert (run["name"], run["evaluated_component_name"]) == (None, None)
        assert run["eval_data"]["judgehooks"]["record"]["agent_name"] == "os-agent"
    passed, failed, error = (by_status[s]["eval_data"] for s in ("passed", "failed", "error"))
    # eval_data is shaped like agno's AgentAsJudgeResult
    assert (passed["avg_score"], passed["pass_rate"], passed["results"][0]["passed"]) == (9, 100.0, True)
    assert (failed["avg_score"], failed["pass_rate"], failed["results"][0]["score"]) == (2, 0.0, 2)
    assert (error["results"], error["pass_rate"]) == ([], None)
    assert error["judgehooks"]["record"]["error_type"] == "InternalServerError"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["SqliteDb", "AsyncSqliteDb"])
async def test_writes_are_idempotent_and_set_the_owner(kind, tmp_path, request):
    from judgehooks import EvalRecord

    db = _agno_db(kind, tmp_path, request)
    store = AgnoDbStore(db)
    record = EvalRecord(id="r-1", status="passed", evaluator="e", mode="binary", passed=True, agent_id="a",
                        user_id="u-1")
    await store.write([record])
    await store.write([record, record])  # re-delivered, and twice in one batch
    runs = db.get_eval_runs(agent_id="a")
    runs = await runs if hasattr(runs, "__await__") else runs
    assert [run.run_id for run in runs] == ["r-1"]
    row = db.get_eval_run("r-1", deserialize=False)
    row = await row if hasattr(row, "__await__") else row
    assert row["user_id"] == "u-1"


def test_dbs_that_cannot_hold_eval_runs_are_refused_by_name(make_judge):
    from agno.db.base import BaseDb
    from agno.db.in_memory import InMemoryDb

    no_owner = type("NoOwnerDb", (InMemoryDb,), {"update_eval_run_user_id": BaseDb.update_eval_run_user_id})
    with pytest.raises(TypeError, match=r"db NoOwnerDb does not store agno eval runs with an owner "
                                        r"\(update_eval_run_user_id\)"):
        make_judge(db=no_owner())
    with pytest.raises(TypeError, match="db must be an agno database .* got dict"):
        make_judge(db={})


def test_agno_calls_the_hook_inline_so_the_job_is_queued_before_the_response(make_judge):
    """agno's normaliser gives AgentOS a `run_in_background=True` eval as a FastAPI background task,
    run after the response is sent; ours it must call inline (it only hands the run to our durable
    queue). agno's own class beside ours, through agno's own normaliser."""
    from agno.eval.agent_as_judge import AgentAsJudgeEval as AgnoJudge
    from agno.hooks.decorator import HOOK_RUN_IN_BACKGROUND_ATTR
    from agno.utils.hooks import normalize_post_hooks

    ours = make_judge(run_in_background=True)
    theirs = AgnoJudge(criteria="c", run_in_background=True, telemetry=False)
    for async_mode in (False, True):
        ours_hook, theirs_hook = normalize_post_hooks([ours, theirs], async_mode=async_mode)
        assert getattr(ours_hook, HOOK_RUN_IN_BACKGROUND_ATTR) is False
        assert getattr(theirs_hook, HOOK_RUN_IN_BACKGROUND_ATTR) is True
    # every reader reads agno's scheduling answer; whether it grades in the background is the settings'
    assert ours.run_in_background is False and ours.hook_settings.run_in_background is True
    assert ours.stats()["submitted"] == 0
