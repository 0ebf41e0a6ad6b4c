"""Background grading inside web hosts: a FastAPI app and agno's AgentOS."""

from __future__ import annotations

import asyncio

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import judgehooks


@pytest.fixture
def bg_judge(make_judge, tmp_path):
    return make_judge(run_in_background=True, outbox=str(tmp_path / "outbox.db"))


def test_fastapi_sync_and_async_routes_hand_off_and_are_graded(bg_judge, make_agent, store, server):
    server.configure(judge_delay_ms=300)
    agent = make_agent(bg_judge, id="api-agent")
    app = FastAPI()

    @app.post("/ask-async")
    async def ask_async(q: str) -> dict:
        out = await agent.arun(q)
        return {"run_id": out.run_id, "graded_yet": any(r.run_id == out.run_id for r in store.records)}

    @app.post("/ask-sync")
    def ask_sync(q: str) -> dict:
        out = agent.run(q)
        return {"run_id": out.run_id, "graded_yet": any(r.run_id == out.run_id for r in store.records)}

    with TestClient(app) as client:
        replies = [client.post(f"/ask-{kind}", params={"q": f"{kind} {i}"}).json()
                   for i in range(3) for kind in ("async", "sync")]
    assert not any(reply["graded_yet"] for reply in replies)  # each response left before its verdict
    assert judgehooks.drain(30)
    assert sorted(r.run_id for r in store.records) == sorted(reply["run_id"] for reply in replies)
    assert {r.agent_id for r in store.records} == {"api-agent"}


def test_agentos_with_background_tasks_still_grades_every_run(bg_judge, make_agent, store):
    from agno.os import AgentOS

    agent = make_agent(bg_judge, id="os-agent", name="os-agent")
    app = AgentOS(agents=[agent], telemetry=False).get_app()
    with TestClient(app) as client:
        for i in range(3):
            response = client.post("/agents/os-agent/runs", data={"message": f"hello {i}", "stream": "false"})
            assert response.status_code == 200, response.text
    assert judgehooks.drain(30)
    assert sorted(r.input for r in store.records) == ["hello 0", "hello 1", "hello 2"]
    assert {r.agent_id for r in store.records} == {"os-agent"}


def _lifespan_app(agent, judge, drain_timeout=30.0):
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def app_lifespan(app):
        async with judgehooks.lifespan(drain_timeout=drain_timeout):
            app.state.loop = asyncio.get_running_loop()
            yield

    app = FastAPI(lifespan=app_lifespan)

    @app.post("/ask")
    async def ask(q: str) -> dict:
        out = await agent.arun(q)
        return {"run_id": out.run_id, "where": judgehooks.stats()[judge.evaluator]["loop"]}

    return app


def test_lifespan_grades_and_calls_back_on_the_apps_own_loop(make_judge, make_agent, store, tmp_path):
    callback_loops = []

    async def on_fail(record):
        callback_loops.append(asyncio.get_running_loop())

    # Built before the app starts: its dispatcher begins on judgehooks' loop and moves in.
    judge = make_judge(run_in_background=True, outbox=str(tmp_path / "outbox.db"), on_fail=on_fail)
    agent = make_agent(judge, id="lifespan-agent")
    app = _lifespan_app(agent, judge)
    with TestClient(app) as client:
        replies = [client.post("/ask", params={"q": f"q{i} [[fail]]"}).json() for i in range(4)]
        app_loop = app.state.loop
    # Leaving the lifespan drained the queue: every run is stored without calling drain().
    assert sorted(r.run_id for r in store.records) == sorted(reply["run_id"] for reply in replies)
    assert {reply["where"] for reply in replies} == {"app"}
    assert len(callback_loops) == 4 and all(loop is app_loop for loop in callback_loops)
    assert judgehooks.stats()[judge.evaluator]["loop"] == "judgehooks"  # handed back on exit


def test_lifespan_exit_hands_unfinished_jobs_back_and_loses_none(make_judge, make_agent, store, server, tmp_path):
    server.configure(judge_delay_ms=400)
    judge = make_judge(run_in_background=True, outbox=str(tmp_path / "outbox.db"))
    agent = make_agent(judge, id="lifespan-agent")
    with TestClient(_lifespan_app(agent, judge, drain_timeout=0)) as client:
        run_ids = [client.post("/ask", params={"q": f"q{i}"}).json()["run_id"] for i in range(6)]
    assert judgehooks.drain(30)  # finished on judgehooks' own loop after the app stopped
    assert sorted(r.run_id for r in store.records) == sorted(run_ids)
    assert {r.status for r in store.records} == {"passed"}


def test_lifespan_is_entered_once_and_checks_its_setting():
    async def nested():
        async with judgehooks.lifespan():
            async with judgehooks.lifespan():
                pass

    with pytest.raises(RuntimeError, match="already active"):
        asyncio.run(nested())
    with pytest.raises(ValueError, match="drain_timeout"):
        asyncio.run(judgehooks.lifespan(drain_timeout=-1).__aenter__())
