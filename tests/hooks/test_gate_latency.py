"""gate_latency_s / gate_on_timeout: a gate with no verdict in time decides by its policy, on every
path a gate can sit on (run, arun, a team's run and arun, judgehooks.stream and astream), over
the loopback model server with a judge that answers late."""

from __future__ import annotations

import math

import pytest
from agno.run.agent import RunContentEvent
from agno.run.base import RunStatus
from agno.run.team import RunContentEvent as TeamRunContentEvent

import judgehooks

FALLBACK = "Sorry, a reviewer stopped this answer."
SLOW = "where is my order [[judge_delay=5000]]"  # the judge answers long after the budget
ANSWER = f"ECHO: {SLOW}"


async def _content(owner, path: str) -> str | None:
    """What the caller gets on `path`: the run's content, or the streamed text."""
    if path == "run":
        out = owner.run(SLOW)
        return out.content if out.status == RunStatus.completed else f"ERROR: {out.content}"
    if path == "arun":
        out = await owner.arun(SLOW)
        return out.content if out.status == RunStatus.completed else f"ERROR: {out.content}"
    events = (list(judgehooks.stream(owner, SLOW)) if path == "stream"
              else [e async for e in judgehooks.astream(owner, SLOW)])
    return "".join(e.content for e in events if isinstance(e, (RunContentEvent, TeamRunContentEvent)))


@pytest.mark.anyio
@pytest.mark.parametrize("owner", ["agent", "team"])
@pytest.mark.parametrize("path", ["run", "arun", "stream", "astream"])
@pytest.mark.parametrize("policy", ["block", "allow"])
async def test_a_late_verdict_is_decided_by_the_policy_and_recorded_as_such(
        make_judge, make_agent, make_team, store, owner, path, policy):
    judge = make_judge(gate=True, fallback=FALLBACK, gate_latency_s=0.3, gate_on_timeout=policy)
    target = make_agent(judge) if owner == "agent" else make_team(judge)
    shown = await _content(target, path)
    if policy == "block":
        assert shown in (FALLBACK, f"ERROR: {FALLBACK}") and "ECHO" not in shown
    else:
        assert shown == ANSWER
    (record,) = store.records  # one record: the late verdict was cancelled before it was stored
    assert (record.status, record.reason) == ("skipped", "gate_latency")
    assert record.details == {"decided_by": "policy", "gate_on_timeout": policy, "gate_latency_s": 0.3}


def test_a_verdict_within_the_budget_decides_as_usual(make_judge, make_agent, store):
    agent = make_agent(make_judge(gate=True, fallback=FALLBACK, gate_latency_s=30))
    assert agent.run("where is my order").content == "ECHO: where is my order"
    assert agent.run("bad [[fail]]").content == FALLBACK
    assert [r.status for r in store.records] == ["passed", "failed"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"gate_latency_s": math.nan}, "gate_latency_s must be a finite number"),
    ({"gate_latency_s": 0}, "gate_latency_s must be a number > 0"),
    ({"gate_latency_s": "1"}, "gate_latency_s must be a number"),
    ({"gate_on_timeout": "open"}, "gate_on_timeout must be one of 'block', 'allow'"),
])
def test_bad_latency_settings_are_refused_by_name(make_judge, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_judge(gate=True, **kwargs)
