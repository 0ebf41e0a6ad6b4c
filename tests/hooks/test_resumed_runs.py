"""Runs that pause for a person (agno's human in the loop) and resume with `continue_run` /
`acontinue_run`: graded once, on the final answer, in a record linked to the pause.

Real agno agents and teams with tools that need a confirmation, user input or external execution,
the agent's model and the judge on the suite's loopback server. Where a test says what agno does
(no post hook on a paused run, one on the resumed run), agno's own `AgentAsJudgeEval` runs beside
ours on the same run and is held to it too.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agno.agent import Agent
from agno.db.sqlite import SqliteDb
from agno.eval.agent_as_judge import AgentAsJudgeEval as AgnoEval
from agno.models.openai.like import OpenAILike
from agno.run.base import RunStatus
from agno.team import Team
from agno.tools import tool
from structlog.testing import capture_logs

import judgehooks
from judgehooks.testing import StubLLMServer

PAUSED_NOTE = "I have tools to execute, but I need confirmation."


@tool(requires_confirmation=True)
def lookup(text: str) -> str:
    """Look something up."""
    return "LOOKED-UP"


@tool(requires_confirmation=True)
def archive(text: str) -> str:
    """Archive something."""
    return "ARCHIVED"


@tool(requires_user_input=True, user_input_fields=["to"])
def send(subject: str, to: str) -> str:
    """Send a message."""
    return f"SENT-TO-{to}"


@tool(external_execution=True)
def run_shell(command: str) -> str:
    """Run a shell command somewhere else."""
    return "never run here"


def model(server: StubLLMServer) -> OpenAILike:
    return OpenAILike(id="agent", base_url=server.base_url, api_key="k")


def agno_eval(server: StubLLMServer, db: SqliteDb) -> AgnoEval:
    """agno's own evaluator, writing its eval rows to `db`."""
    return AgnoEval(name="agno-judge", criteria="The answer echoes the question.", scoring_strategy="binary",
                    model=OpenAILike(id="judge", base_url=server.base_url, api_key="k"), db=db)


def agno_outputs(db: SqliteDb) -> list[str]:
    """The output of every run agno's evaluator graded, from its eval rows."""
    return [result["output"] for run in db.get_eval_runs() or [] for result in run.eval_data["results"]]


def confirm_all(out: Any) -> None:
    for req in out.active_requirements:
        req.confirm()


def pause_of(paused: Any) -> tuple[str, str]:
    """The paused run's id and when it paused, read before the resume (a team's resume empties the
    paused run's own requirements: they live on on its member's run)."""
    return paused.run_id, min(r.created_at for r in paused.requirements).isoformat()


def assert_linked(record: Any, pause: tuple[str, str], *, kind: str = "confirmation", decision: str = "confirmed",
                  tool_name: str = "lookup") -> None:
    """`record` is the resumed run's, linked to the pause (agno keeps the run id)."""
    run_id, paused_at = pause
    assert record.run_id == run_id
    assert record.metadata["resumed_from_run_id"] == run_id
    assert record.metadata["paused_at"] == paused_at
    assert [{k: v for k, v in item.items() if k != "member_run_id"} for item in record.metadata["paused_for"]] == [
        {"tool": tool_name, "kind": kind, "decision": decision}]


@pytest.fixture
def agno_db(tmp_path) -> SqliteDb:
    return SqliteDb(db_file=str(tmp_path / "agno.db"))


def test_a_confirmed_run_is_graded_once_on_its_final_answer_linked_to_the_pause(make_judge, store, server, agno_db):
    agent = Agent(model=model(server), tools=[lookup], telemetry=False,
                  post_hooks=[make_judge(), agno_eval(server, agno_db)])
    paused = agent.run("use a tool [[tool=lookup]]")
    assert paused.status == RunStatus.paused and paused.content == PAUSED_NOTE
    assert store.records == [] and agno_outputs(agno_db) == []  # agno calls no post hook on a pause

    confirm_all(paused)
    done = agent.continue_run(run_response=paused, requirements=paused.requirements)

    final = "ECHO: use a tool [[tool=lookup]] TOOL_RESULT: LOOKED-UP"
    assert done.status == RunStatus.completed and done.content == final
    assert agno_outputs(agno_db) == [final]  # agno's evaluator: once, on the final answer
    [record] = store.records
    assert record.status == "passed" and record.output == final
    assert_linked(record, pause_of(paused))


def test_an_async_resumed_run_is_graded_once_linked_to_the_pause(make_judge, store, server, agno_db):
    agent = Agent(model=model(server), tools=[lookup], telemetry=False,
                  post_hooks=[make_judge(), agno_eval(server, agno_db)])

    async def main() -> tuple[Any, Any]:
        paused = await agent.arun("use a tool [[tool=lookup]]")
        assert paused.status == RunStatus.paused and store.records == []
        confirm_all(paused)
        return paused, await agent.acontinue_run(run_response=paused, requirements=paused.requirements)

    paused, done = asyncio.run(main())
    assert agno_outputs(agno_db) == [done.content]
    [record] = store.records
    assert record.output == done.content == "ECHO: use a tool [[tool=lookup]] TOOL_RESULT: LOOKED-UP"
    assert_linked(record, pause_of(paused))


def test_a_streamed_pause_and_streamed_resume_are_graded_once(make_judge, store, server):
    agent = Agent(model=model(server), tools=[lookup], telemetry=False, post_hooks=[make_judge()])
    *_, paused = agent.run("use a tool [[tool=lookup]]", stream=True, yield_run_output=True)
    assert paused.status == RunStatus.paused and store.records == []
    confirm_all(paused)
    *_, done = agent.continue_run(run_response=paused, requirements=paused.requirements, stream=True,
                                  yield_run_output=True)
    [record] = store.records
    assert record.output == done.content == "ECHO: use a tool [[tool=lookup]] TOOL_RESULT: LOOKED-UP"
    assert_linked(record, pause_of(paused))


def test_an_async_streamed_resume_is_graded_once(make_judge, store, server):
    agent = Agent(model=model(server), tools=[lookup], telemetry=False, post_hooks=[make_judge()])

    async def main() -> tuple[Any, Any]:
        events = [e async for e in agent.arun("use a tool [[tool=lookup]]", stream=True, yield_run_output=True)]
        paused = events[-1]
        confirm_all(paused)
        events = [e async for e in agent.acontinue_run(run_response=paused, requirements=paused.requirements,
                                                      stream=True, yield_run_output=True)]
        return paused, events[-1]

    paused, done = asyncio.run(main())
    [record] = store.records
    assert record.output == done.content and "TOOL_RESULT: LOOKED-UP" in record.output
    assert_linked(record, pause_of(paused))


def test_a_run_that_pauses_twice_gets_one_record_listing_both_pauses(make_judge, store, server):
    agent = Agent(model=model(server), tools=[lookup, archive], telemetry=False, post_hooks=[make_judge()])
    out = agent.run("look it up, then archive it [[tools=lookup,archive]]")
    pause = pause_of(out)
    pauses = 0
    while out.is_paused:
        pauses += 1
        confirm_all(out)
        out = agent.continue_run(run_response=out, requirements=out.requirements)
    assert pauses == 2 and out.status == RunStatus.completed
    [record] = store.records
    assert record.output == out.content and record.metadata["paused_at"] == pause[1]
    assert record.metadata["paused_for"] == [{"tool": "lookup", "kind": "confirmation", "decision": "confirmed"},
                                             {"tool": "archive", "kind": "confirmation", "decision": "confirmed"}]


def test_a_forked_resume_is_its_own_run_naming_the_one_that_paused(make_judge, store, server):
    """`continue_run(fork=True)` resumes under a new run id (agno's `forked_from_run_id` names the
    original): the record is the fork's, and links the run that paused."""
    agent = Agent(model=model(server), tools=[lookup], telemetry=False, post_hooks=[make_judge()])
    paused = agent.run("use a tool [[tool=lookup]]")
    pause = pause_of(paused)
    confirm_all(paused)
    done = agent.continue_run(run_response=paused, requirements=paused.requirements, fork=True)
    assert done.run_id != pause[0] and done.forked_from_run_id == pause[0]
    [record] = store.records
    assert record.run_id == done.run_id and record.metadata["resumed_from_run_id"] == pause[0]
    assert record.metadata["paused_at"] == pause[1]


def test_a_resumed_run_graded_in_the_background_keeps_its_link(make_judge, store, server, tmp_path):
    """The link is part of the run's snapshot, so it travels with the job through the outbox."""
    agent = Agent(model=model(server), tools=[lookup], telemetry=False,
                  post_hooks=[make_judge(run_in_background=True, outbox=str(tmp_path / "jobs.db"))])
    paused = agent.run("use a tool [[tool=lookup]]")
    confirm_all(paused)
    done = agent.continue_run(run_response=paused, requirements=paused.requirements)
    assert judgehooks.drain(30)
    [record] = store.records
    assert record.output == done.content
    assert_linked(record, pause_of(paused))


def test_a_rejected_tool_is_recorded_as_rejected(make_judge, store, server):
    agent = Agent(model=model(server), tools=[lookup], telemetry=False, post_hooks=[make_judge()])
    plain = agent.run("no tool here")  # a run that never paused: no link
    [unlinked] = store.records
    assert not {"resumed_from_run_id", "paused_at", "paused_for"} & set(unlinked.metadata)
    paused = agent.run("use a tool [[tool=lookup]]")
    for req in paused.active_requirements:
        req.reject("not now")
    done = agent.continue_run(run_response=paused, requirements=paused.requirements)
    [record] = [r for r in store.records if r.run_id != plain.run_id]
    assert record.output == done.content and "LOOKED-UP" not in record.output
    assert_linked(record, pause_of(paused), decision="rejected")


def test_user_input_and_external_execution_resumes_are_linked(make_judge, store, server):
    agent = Agent(model=model(server), tools=[send, run_shell], telemetry=False, post_hooks=[make_judge()])
    asked = agent.run("mail it [[tool=send]]")
    assert asked.is_paused and store.records == []
    for req in asked.active_requirements:
        req.provide_user_input({"to": "ops"})
    agent.continue_run(run_response=asked, requirements=asked.requirements)

    outside = agent.run("run it [[tool=run_shell]]")
    assert outside.is_paused
    for req in outside.active_requirements:
        req.set_external_execution_result("EXIT-0")
    agent.continue_run(run_response=outside, requirements=outside.requirements)

    mailed, ran = (next(r for r in store.records if r.run_id == run.run_id) for run in (asked, outside))
    assert len(store.records) == 2
    assert "SENT-TO-ops" in mailed.output and "EXIT-0" in ran.output
    assert_linked(mailed, pause_of(asked), kind="user_input", decision="resolved", tool_name="send")
    assert_linked(ran, pause_of(outside), kind="external_execution", decision="resolved", tool_name="run_shell")


@pytest.mark.parametrize("first_call", ["run", "continue_run", "acontinue_run"])
def test_a_resume_by_run_id_is_graded_even_as_the_agents_first_call(make_judge, store, server, agno_db, first_call):
    """AgentOS resumes a paused run by its id from the agno db, in a new request, perhaps on an
    instance that has not run yet (after a restart). agno normalises hooks on `run` only, so there
    agno's own evaluator is never called (a TypeError in agno's log) and ours still grades the run."""
    def build() -> Agent:
        return Agent(model=model(server), tools=[lookup], telemetry=False, db=agno_db,
                     post_hooks=[make_judge(), agno_eval(server, agno_db)])

    agent = build()
    paused = agent.run("use a tool [[tool=lookup]]")
    confirm_all(paused)
    resumer = agent if first_call == "run" else build()
    resume = dict(run_id=paused.run_id, session_id=paused.session_id, requirements=paused.requirements)
    done = (asyncio.run(resumer.acontinue_run(**resume)) if first_call == "acontinue_run"
            else resumer.continue_run(**resume))
    assert done.status == RunStatus.completed
    assert agno_outputs(agno_db) == ([done.content] if first_call == "run" else [])
    [record] = store.records
    assert record.output == done.content
    assert_linked(record, pause_of(paused))


def test_a_paused_run_handed_to_the_hook_is_not_graded(make_judge, store, server):
    """agno calls no post hook on a pause, but the hook is public: a paused run handed to it by hand
    is not finished, so it gets no record (and is not counted by sampling); its resume gets one."""
    judge, never = make_judge(), make_judge(name="never", sample_rate=0.0)
    agent = Agent(model=model(server), tools=[lookup], telemetry=False, post_hooks=[judge, never])
    paused = agent.run("use a tool [[tool=lookup]]")
    with capture_logs() as logs:
        judge.post_check(paused, agent=agent)
        never.post_check(paused, agent=agent)
    assert store.records == [] and judge.stats()["submitted"] == 0 and never.stats()["sampled_out"] == 0
    assert [(e["event"], e["log_level"]) for e in logs] == [("run_paused_not_graded", "debug")] * 2
    confirm_all(paused)
    agent.continue_run(run_response=paused, requirements=paused.requirements)
    assert never.stats()["sampled_out"] == 1  # the resumed run: sampled once, as any finished run
    [record] = store.records
    assert_linked(record, pause_of(paused))


def test_a_gate_on_a_resumed_run_blocks_a_failed_answer(make_judge, store, server):
    agent = Agent(model=model(server), tools=[lookup], telemetry=False, post_hooks=[make_judge(gate=True)])
    paused = agent.run("use a tool [[tool=lookup]] [[fail]]")
    confirm_all(paused)
    done = agent.continue_run(run_response=paused, requirements=paused.requirements)
    assert done.content == make_judge().fallback and "LOOKED-UP" not in str(done.content)
    [record] = store.records
    assert record.status == "failed"
    assert_linked(record, pause_of(paused))


def test_a_gate_repair_that_pauses_again_blocks_instead_of_showing_the_pause_note(make_judge, store, server):
    """A repair re-run that asks for the tool's confirmation again has no answer to show: nobody is
    there to confirm it, so the gate blocks rather than hand over agno's pause note as the answer."""
    judge = make_judge(gate=True, repair=1)
    agent = Agent(model=model(server), tools=[lookup], telemetry=False, post_hooks=[judge])
    paused = agent.run("use a tool [[tool=lookup]] [[fail_first=1]]")
    confirm_all(paused)
    with capture_logs() as logs:
        done = agent.continue_run(run_response=paused, requirements=paused.requirements)
    assert done.content == judge.fallback
    assert "repair_run_paused" in [e["event"] for e in logs]
    [record] = store.records  # the resumed run's: the paused re-run is not graded
    assert record.status == "failed"
    assert_linked(record, pause_of(paused))


def test_a_team_resumed_after_a_member_pause_is_graded_once(make_judge, store, server, agno_db):
    member = Agent(model=model(server), name="researcher", id="researcher", tools=[lookup], telemetry=False)
    team = Team(members=[member], model=model(server), id="team-1", telemetry=False,
                post_hooks=[make_judge(), agno_eval(server, agno_db)])
    paused = team.run("look it up [[tools=delegate_task_to_member,lookup]] [[member=researcher]]")
    assert paused.status == RunStatus.paused and store.records == [] and agno_outputs(agno_db) == []
    pause = pause_of(paused)
    confirm_all(paused)
    done = team.continue_run(run_response=paused, requirements=paused.requirements)
    assert done.status == RunStatus.completed
    assert agno_outputs(agno_db) == [done.content]
    [record] = store.records
    assert record.team_id == "team-1" and record.output == done.content
    assert_linked(record, pause)
    [member_run] = done.member_responses
    assert record.metadata["paused_for"][0]["member_run_id"] == member_run.run_id


def test_an_async_team_resume_is_graded_once(make_judge, store, server):
    member = Agent(model=model(server), name="researcher", id="researcher", tools=[lookup], telemetry=False)
    team = Team(members=[member], model=model(server), id="team-1", telemetry=False, post_hooks=[make_judge()])

    async def main() -> tuple[Any, Any]:
        paused = await team.arun("look it up [[tools=delegate_task_to_member,lookup]] [[member=researcher]]")
        assert paused.status == RunStatus.paused and store.records == []
        pause = pause_of(paused)
        confirm_all(paused)
        return pause, await team.acontinue_run(run_response=paused, requirements=paused.requirements)

    pause, done = asyncio.run(main())
    [record] = store.records
    assert record.output == done.content
    assert_linked(record, pause)
