"""Quality gates and repair on real agno agents and teams, judged over HTTP by the loopback server."""

from __future__ import annotations

import asyncio

import pytest
from agno.agent import Agent
from agno.run.agent import RunCompletedEvent, RunContentEvent, RunErrorEvent
from agno.run.base import RunStatus
from agno.run.team import RunCompletedEvent as TeamRunCompletedEvent
from agno.run.team import RunErrorEvent as TeamRunErrorEvent
from agno.team import Team
from conftest import model

FALLBACK = "Sorry, a reviewer stopped this answer."


def statuses(store):
    return [r.status for r in store.records]


# ---- gate ---------------------------------------------------------------------------------------

def test_gate_on_a_team_blocks_the_answer_and_the_caller_sees_the_fallback(make_judge, make_team, store):
    team = make_team(make_judge(gate=True, fallback=FALLBACK), name="Support", id="team-gate")
    out = team.run("refund me now [[fail]]")
    assert out.content == FALLBACK and out.status == RunStatus.error
    (record,) = store.records
    assert (record.status, record.team_id, record.run_id) == ("failed", "team-gate", out.run_id)
    assert record.output == "ECHO: refund me now [[fail]]"  # the record keeps what was blocked


@pytest.mark.anyio
async def test_gate_on_a_team_blocks_under_arun(make_judge, make_team, store):
    team = make_team(make_judge(gate=True, fallback=FALLBACK))
    out = await team.arun("refund me now [[fail]]")
    assert (out.content, out.status, statuses(store)) == (FALLBACK, RunStatus.error, ["failed"])


def test_gate_lets_a_passing_answer_through_untouched(make_judge, make_team, store):
    team = make_team(make_judge(gate=True, fallback=FALLBACK))
    out = team.run("where is my order")
    assert out.content == "ECHO: where is my order" and out.status == RunStatus.completed
    assert statuses(store) == ["passed"]


def test_gate_on_a_member_agent_keeps_its_answer_from_the_team_leader(make_judge, server, store):
    member = Agent(model=model(server), name="member", telemetry=False,
                   post_hooks=[make_judge(gate=True, fallback=FALLBACK)])
    team = Team(members=[member], model=model(server), telemetry=False)
    out = team.run("[[fail]] [[tool=delegate_task_to_member]] [[arg_member_id=member]]")
    (member_run,) = out.member_responses
    assert member_run.status == RunStatus.error and member_run.content == FALLBACK
    # The leader got the fallback as the member's answer, never the rejected text.
    assert out.content.endswith(f"TOOL_RESULT: {FALLBACK}")
    (record,) = store.records
    assert record.status == "failed" and record.agent_name == "member" and record.output.startswith("ECHO:")


@pytest.mark.parametrize("failure", ["[[judge_status=500]]", "[[judge_malformed]]", "[[judge_status=400]]"])
def test_a_gate_blocks_by_default_when_the_judge_gives_no_verdict(make_judge, make_agent, store, failure):
    """gate_on_error="block" (the default): an unjudged answer is not delivered, e.g. one padded past
    the judge's context window (a 400) or a judge outage."""
    out = make_agent(make_judge(gate=True, fallback=FALLBACK, retries=0)).run(f"wrong answer {failure}")
    assert (out.content, out.status) == (FALLBACK, RunStatus.error)
    assert statuses(store) == ["error"]  # the record is still an error, never a failure


@pytest.mark.anyio
async def test_a_gate_blocks_on_a_judge_error_under_arun_and_logs_why(make_judge, make_agent, store):
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        out = await make_agent(make_judge(gate=True, fallback=FALLBACK, retries=0)).arun("q [[judge_status=500]]")
    assert (out.content, out.status) == (FALLBACK, RunStatus.error)
    [blocked] = [e for e in logs if e["event"] == "gate_blocked"]
    assert (blocked["status"], blocked["error_type"], blocked["repairs"]) == ("error", "InternalServerError", 0)


def test_gate_on_error_allow_lets_an_unjudged_answer_through(make_judge, make_agent, store):
    agent = make_agent(make_judge(gate=True, fallback=FALLBACK, retries=0, gate_on_error="allow"))
    out = agent.run("hello [[judge_status=500]]")
    assert out.content == "ECHO: hello [[judge_status=500]]" and out.status == RunStatus.completed
    assert statuses(store) == ["error"]


@pytest.mark.parametrize("gate_on_error", ["block", "allow"])
def test_a_repair_attempt_without_a_verdict_is_shown_only_when_allowed(make_judge, make_agent, store, server,
                                                                       gate_on_error):
    # the first verdict fails; then the judge goes down, so the repair attempt gets no verdict
    judge = make_judge(repair=1, fallback=FALLBACK, retries=0, gate_on_error=gate_on_error,
                       on_fail=lambda record: server.configure(judge_fail_next=10))
    out = make_agent(judge).run("q [[fail]]")
    assert statuses(store) == ["failed", "error"]
    if gate_on_error == "block":
        assert (out.content, out.status) == (FALLBACK, RunStatus.error)
    else:
        assert out.content == store.records[1].output and out.status == RunStatus.completed


def test_a_gate_keeps_blocking_once_its_spend_cap_is_reached(make_judge, make_agent, store):
    """Over `max_calls` the record is `skipped` (reason "budget"): no verdict, so by default the gate
    blocks, or flooding requests to use up the cap would open it for the rest of the window."""
    agent = make_agent(make_judge(name="gate-capped", gate=True, fallback=FALLBACK, max_calls=1, per="hour"))
    first, over = agent.run("q0"), agent.run("q1 [[fail]]")
    assert (first.content, first.status) == ("ECHO: q0", RunStatus.completed)
    assert (over.content, over.status) == (FALLBACK, RunStatus.error)
    assert statuses(store) == ["passed", "skipped"] and store.records[1].reason == "budget"


@pytest.mark.anyio
async def test_a_gate_over_its_spend_cap_blocks_a_team_under_arun_and_logs_why(make_judge, make_team, store):
    from structlog.testing import capture_logs

    team = make_team(make_judge(name="gate-capped-team", gate=True, fallback=FALLBACK, max_calls=1, per="day"))
    await team.arun("q0")
    with capture_logs() as logs:
        out = await team.arun("q1")
    assert (out.content, out.status) == (FALLBACK, RunStatus.error)
    [blocked] = [e for e in logs if e["event"] == "gate_blocked"]
    assert (blocked["status"], blocked["reason"]) == ("skipped", "budget")


def test_gate_on_skip_allow_delivers_an_answer_over_the_spend_cap(make_judge, make_agent, store):
    agent = make_agent(make_judge(name="gate-capped-allow", gate=True, fallback=FALLBACK, max_calls=1,
                                  gate_on_skip="allow"))
    agent.run("q0")
    out = agent.run("q1")
    assert (out.content, out.status) == ("ECHO: q1", RunStatus.completed)
    assert statuses(store) == ["passed", "skipped"]


@pytest.mark.parametrize("gate_on_skip", ["block", "allow"])
def test_a_repair_attempt_over_the_spend_cap_is_shown_only_when_allowed(make_judge, make_agent, store,
                                                                        gate_on_skip):
    # the first verdict fails and spends the only call; the repair attempt is skipped for budget
    judge = make_judge(name=f"repair-capped-{gate_on_skip}", repair=1, fallback=FALLBACK, max_calls=1,
                       gate_on_skip=gate_on_skip)
    out = make_agent(judge).run("q [[fail]]")
    assert statuses(store) == ["failed", "skipped"]
    if gate_on_skip == "block":
        assert (out.content, out.status) == (FALLBACK, RunStatus.error)
    else:
        assert out.content == store.records[1].output and out.status == RunStatus.completed


def test_gate_on_skip_can_be_configured_later_and_is_checked_then(make_judge, make_agent, store):
    judge = make_judge(name="gate-capped-assigned", gate=True, fallback=FALLBACK, max_calls=1)
    agent = make_agent(judge)
    agent.run("q0")
    with pytest.raises(ValueError, match="gate_on_skip must be one of 'block', 'allow'"):
        judge.configure(gate_on_skip="open")
    assert agent.run("q1").content == FALLBACK
    judge.configure(gate_on_skip="allow")
    assert agent.run("q2").content == "ECHO: q2"


def test_streamed_text_cannot_be_unsent_but_the_stream_ends_in_an_error_with_the_fallback(
        make_judge, make_agent, store):
    agent = make_agent(make_judge(gate=True, fallback=FALLBACK))
    events = list(agent.run("stream me [[fail]]", stream=True, stream_events=True))
    streamed = "".join(e.content for e in events if isinstance(e, RunContentEvent) and e.content)
    assert streamed == "ECHO: stream me [[fail]]"  # already delivered before the verdict existed
    assert isinstance(events[-1], RunErrorEvent) and events[-1].content == FALLBACK
    assert not any(isinstance(e, RunCompletedEvent) for e in events)
    assert statuses(store) == ["failed"]


@pytest.mark.anyio
async def test_async_team_stream_ends_in_an_error_with_the_fallback(make_judge, make_team, store):
    team = make_team(make_judge(gate=True, fallback=FALLBACK))
    events = [e async for e in team.arun("stream me [[fail]]", stream=True, stream_events=True)]
    assert isinstance(events[-1], TeamRunErrorEvent) and events[-1].content == FALLBACK
    assert statuses(store) == ["failed"]


# ---- repair -------------------------------------------------------------------------------------

def test_repair_succeeds_on_the_second_attempt_and_records_each_attempt(make_judge, make_agent, store):
    agent = make_agent(make_judge(repair=2, fallback=FALLBACK), id="repair-agent")
    out = agent.run("what is 2+2 [[fail_first=1]]", session_id="s1", user_id="u1")
    assert out.status == RunStatus.completed
    assert out.content.startswith("ECHO: what is 2+2") and "rejected the previous answer" in out.content
    first, second = store.records
    assert (first.status, first.run_id) == ("failed", out.run_id)
    assert second.status == "passed" and second.run_id != out.run_id
    assert (second.metadata["judgehooks_repair_of"], second.metadata["judgehooks_repair_attempt"]) == (out.run_id, 1)
    assert "stub judge says fail" in second.input  # the judge's reason was the guidance
    assert (second.agent_id, second.session_id, second.user_id) == ("repair-agent", "s1", "u1")
    assert out.content == second.output


@pytest.mark.anyio
async def test_repair_on_a_team_under_arun(make_judge, make_team, store):
    team = make_team(make_judge(repair=1, fallback=FALLBACK), id="repair-team")
    out = await team.arun("help me [[fail_first=1]]")
    assert out.status == RunStatus.completed and out.content != FALLBACK
    assert statuses(store) == ["failed", "passed"]
    assert store.records[1].team_id == "repair-team" and out.content == store.records[1].output


def test_repair_gives_up_after_k_attempts_and_the_caller_sees_the_fallback(make_judge, make_agent, store):
    agent = make_agent(make_judge(repair=2, fallback=FALLBACK))
    out = agent.run("hopeless [[fail]]")
    assert (out.content, out.status) == (FALLBACK, RunStatus.error)
    assert statuses(store) == ["failed", "failed", "failed"]  # the run and exactly two repairs: no recursion
    assert [r.metadata.get("judgehooks_repair_attempt") for r in store.records] == [None, 1, 2]


def test_repaired_stream_completes_with_the_repaired_answer(make_judge, make_agent, store):
    agent = make_agent(make_judge(repair=1, fallback=FALLBACK))
    events = list(agent.run("stream [[fail_first=1]]", stream=True, stream_events=True))
    completed = [e for e in events if isinstance(e, RunCompletedEvent)]
    assert len(completed) == 1 and "rejected the previous answer" in completed[0].content
    assert statuses(store) == ["failed", "passed"]


def test_team_repair_completes_the_stream_with_the_repaired_answer(make_judge, make_team, store):
    team = make_team(make_judge(repair=1, fallback=FALLBACK))
    events = list(team.run("stream [[fail_first=1]]", stream=True, stream_events=True))
    assert isinstance(events[-1], TeamRunCompletedEvent) and "rejected the previous answer" in events[-1].content


# ---- configuration ------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"gate": True, "run_in_background": True, "outbox": False}, ValueError, "inline only"),
    ({"repair": 1, "run_in_background": True, "outbox": False}, ValueError, "inline only"),
    ({"repair": -1}, ValueError, "repair must be an integer >= 0"),
    ({"repair": True}, ValueError, "repair must be an integer >= 0"),
    ({"gate": "yes"}, TypeError, "gate must be True or False"),
    ({"gate": True, "fallback": "  "}, ValueError, "fallback must be a non-empty string"),
    ({"gate": True, "gate_on_error": "open"}, ValueError, "gate_on_error must be one of 'block', 'allow'"),
    ({"gate": True, "gate_on_skip": "open"}, ValueError, "gate_on_skip must be one of 'block', 'allow'"),
    ({"gate": True, "gate_on_skip": None}, ValueError, "gate_on_skip must be one of 'block', 'allow'"),
])
def test_gate_settings_are_checked_at_construction(make_judge, kwargs, error, message):
    with pytest.raises(error, match=message):
        make_judge(**kwargs)


@pytest.mark.anyio
async def test_concurrent_gated_runs_each_get_their_own_verdict(make_judge, make_agent, store):
    agent = make_agent(make_judge(gate=True, fallback=FALLBACK))
    outs = await asyncio.gather(*(agent.arun(f"q{i}" + (" [[fail]]" if i % 2 else "")) for i in range(12)))
    for i, out in enumerate(outs):
        assert out.content == (FALLBACK if i % 2 else f"ECHO: q{i}")
    assert sorted(statuses(store)) == ["failed"] * 6 + ["passed"] * 6


def test_repair_on_a_member_agent_hands_the_team_leader_the_repaired_answer(make_judge, server, store):
    member = Agent(model=model(server), name="member", telemetry=False, post_hooks=[make_judge(repair=1)])
    team = Team(members=[member], model=model(server), telemetry=False)
    out = team.run("[[fail_first=1]] [[tool=delegate_task_to_member]] [[arg_member_id=member]]")
    first, repaired = store.records
    assert (first.status, repaired.status, repaired.metadata["judgehooks_repair_attempt"]) == ("failed", "passed", 1)
    assert out.member_responses[0].content == repaired.output
    assert out.content.endswith(f"TOOL_RESULT: {repaired.output}")


def test_the_session_remembers_what_the_caller_saw(make_judge, make_agent):
    blocked = make_agent(make_judge(gate=True, fallback=FALLBACK)).run("q [[fail]]")
    repaired = make_agent(make_judge(repair=1, fallback=FALLBACK)).run("q [[fail_first=1]]")
    assert [m.content for m in blocked.messages if m.role == "assistant"][-1] == FALLBACK
    assert [m.content for m in repaired.messages if m.role == "assistant"][-1] == repaired.content


def test_a_repair_run_that_ends_in_error_stops_repairing_and_blocks(make_judge, make_agent, store):
    repairing = make_judge(name="repairing", repair=3, fallback=FALLBACK)
    strict = make_judge(name="strict", gate=True, fallback="strict says no")
    out = make_agent(repairing, strict).run("q [[fail]]")
    # The first re-run is blocked by the other gate (status error): no further attempts, the fallback.
    assert (out.content, out.status) == (FALLBACK, RunStatus.error)
    assert [(r.evaluator, r.status) for r in store.records] == [("repairing", "failed"), ("strict", "failed")]
