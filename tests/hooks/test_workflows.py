"""Judges in the post hooks of agents inside an agno Workflow (steps, parallel steps, loops,
routers): each step's run is graded, and its record names the workflow, the workflow's run and the
step. A judge can also grade a whole workflow run's final output. Real agno Workflows and agents
over the loopback model server; `judgehooks report` groups the records by workflow and step."""

from __future__ import annotations

import json

import pytest
from agno.workflow import Loop, Parallel, Router, Step, Workflow

import judgehooks

WORKFLOW_KEYS = ("workflow_id", "workflow_name", "workflow_run_id", "step_name")


def _flows(store):
    return sorted((r.metadata.get("step_name"), r.agent_name) for r in store.records)


def _pipeline(make_judge, make_agent, **judge):
    writer = make_agent(make_judge(name="helpful", **judge), name="writer")
    checker = make_agent(make_judge(name="helpful", **judge), name="checker")
    polisher = make_agent(make_judge(name="helpful", **judge), name="polisher")
    steps = [
        Step(name="draft", agent=writer),
        Parallel(Step(name="check", agent=checker), Step(name="second_opinion", agent=writer), name="review"),
        Loop(steps=[Step(name="polish", agent=polisher)], max_iterations=2, name="polishing"),
        Router(selector=lambda step_input: [Step(name="route_b", agent=checker)],
               choices=[Step(name="route_a", agent=writer), Step(name="route_b", agent=checker)], name="route"),
    ]
    return Workflow(name="pipeline", id="wf-1", steps=steps, telemetry=False)


def _check(store, out) -> None:
    assert _flows(store) == [("check", "checker"), ("draft", "writer"), ("polish", "polisher"),
                             ("polish", "polisher"), ("route_b", "checker"), ("second_opinion", "writer")]
    for record in store.records:
        assert {k: record.metadata.get(k) for k in WORKFLOW_KEYS[:3]} == {
            "workflow_id": "wf-1", "workflow_name": "pipeline", "workflow_run_id": out.run_id}
        assert record.metadata["step_id"] and record.run_id != out.run_id  # each step's run is its own
    assert len({r.run_id for r in store.records}) == 6  # a loop's two iterations: two runs, two records


def test_every_step_of_a_workflow_is_graded_and_named(make_judge, make_agent, store):
    out = _pipeline(make_judge, make_agent).run("hello")
    _check(store, out)


@pytest.mark.anyio
async def test_an_async_workflow_names_its_steps_too(make_judge, make_agent, store):
    out = await _pipeline(make_judge, make_agent).arun("hello")
    _check(store, out)


def test_a_streamed_workflow_names_its_steps(make_judge, make_agent, store):
    events = list(_pipeline(make_judge, make_agent).run("hello", stream=True))
    runs = {getattr(e, "run_id", None) for e in events if type(e).__name__ == "WorkflowCompletedEvent"}
    assert len(runs) == 1
    _check(store, type("Out", (), {"run_id": runs.pop()})())


@pytest.mark.anyio
async def test_an_async_streamed_workflow_names_its_steps(make_judge, make_agent, store):
    workflow = _pipeline(make_judge, make_agent)
    events = [e async for e in workflow.arun("hello", stream=True)]
    runs = {getattr(e, "run_id", None) for e in events if type(e).__name__ == "WorkflowCompletedEvent"}
    _check(store, type("Out", (), {"run_id": runs.pop()})())


def test_background_grading_keeps_the_workflow_and_step(make_judge, make_agent, store, tmp_path):
    out = _pipeline(make_judge, make_agent, run_in_background=True, outbox=str(tmp_path / "outbox.db")).run("hi")
    assert judgehooks.drain(60)
    _check(store, out)


def test_a_run_outside_a_workflow_names_none(make_judge, make_agent, store):
    make_agent(make_judge()).run("hello")
    (record,) = store.records
    assert not set(WORKFLOW_KEYS) & set(record.metadata)


def test_a_judge_grades_a_whole_workflow_runs_final_output(make_judge, make_agent, store):
    writer = make_agent(name="writer")
    workflow = Workflow(name="pipeline", id="wf-1", steps=[Step(name="draft", agent=writer)], telemetry=False)
    final = make_judge(name="final_answer")
    out = workflow.run("hello")
    final.post_check(out)
    (record,) = store.records
    assert (record.run_id, record.input, record.output) == (out.run_id, "hello", out.content)
    assert record.agent_id is None and record.team_id is None and "step_name" not in record.metadata
    assert {k: record.metadata.get(k) for k in WORKFLOW_KEYS[:3]} == {
        "workflow_id": "wf-1", "workflow_name": "pipeline", "workflow_run_id": out.run_id}


def test_the_report_groups_records_by_workflow_and_step(make_judge, make_agent, tmp_path, capsys):
    from judgehooks import SQLiteStore
    from judgehooks._cli import main

    store = SQLiteStore(tmp_path / "evals.db")
    _pipeline(make_judge, make_agent, store=store).run("hello")
    judgehooks.drain(30)
    store.close()
    assert main(["report", "--store", str(tmp_path / "evals.db"), "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert sorted((g["kind"], g["name"], g["count"]) for g in groups) == [
        ("workflow", "pipeline · step check", 1), ("workflow", "pipeline · step draft", 1),
        ("workflow", "pipeline · step polish", 2), ("workflow", "pipeline · step route_b", 1),
        ("workflow", "pipeline · step second_opinion", 1)]
    assert main(["report", "--store", str(tmp_path / "evals.db")]) == 0
    assert "workflow pipeline · step polish" in capsys.readouterr().out
