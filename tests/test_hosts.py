"""Background grading inside web hosts: a FastAPI app and agno's AgentOS."""

from __future__ import annotations

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
