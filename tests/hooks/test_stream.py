"""judgehooks.stream / astream: a streamed answer held until the gate passes, on real agno agents and
teams over the loopback model server. Each test collects every event a client would see."""

from __future__ import annotations

import logging

import pytest
from agno.agent import Agent
from agno.run.agent import RunCompletedEvent, RunContentEvent, RunErrorEvent, RunOutput
from agno.run.team import RunCompletedEvent as TeamRunCompletedEvent
from agno.run.team import RunContentEvent as TeamRunContentEvent
from conftest import model

import judgehooks

FALLBACK = "Sorry, a reviewer stopped this answer."
CONTENT = (RunContentEvent, TeamRunContentEvent)
COMPLETED = (RunCompletedEvent, TeamRunCompletedEvent)


def seen(events) -> str:
    """Everything a client could read in the events, as one string."""
    return "\n".join(repr(e) for e in events)


def text(events) -> str:
    return "".join(e.content for e in events if isinstance(e, CONTENT) and isinstance(e.content, str))


@pytest.mark.parametrize("events_on", [True, False])
def test_a_failing_gate_never_lets_the_blocked_text_out(make_judge, make_agent, store, events_on):
    agent = make_agent(make_judge(gate=True, fallback=FALLBACK))
    events = list(judgehooks.stream(agent, "stream me [[fail]]", stream_events=events_on))
    assert "ECHO" not in seen(events)  # agno's plain stream shows "ECHO: stream me [[fail]]" before the verdict
    assert text(events) == FALLBACK
    assert isinstance(events[-1], RunCompletedEvent) and events[-1].content == FALLBACK
    assert isinstance(events[-2], RunContentEvent) and events[-2].run_id == events[-1].run_id
    assert not any(isinstance(e, RunErrorEvent) for e in events)
    assert [r.status for r in store.records] == ["failed"]  # graded once: agno's own post-hook call


def test_a_passing_gate_releases_the_text_complete_and_in_order(make_judge, make_agent, store):
    agent = make_agent(make_judge(gate=True, fallback=FALLBACK))
    events = list(judgehooks.stream(agent, "where is my order", stream_events=True))
    pieces = [e.content for e in events if isinstance(e, RunContentEvent)]
    assert len(pieces) > 1 and "".join(pieces) == "ECHO: where is my order"
    assert isinstance(events[-1], RunCompletedEvent) and events[-1].content == "ECHO: where is my order"
    assert not any(isinstance(e, RunOutput) for e in events)  # agno's run output only when asked for
    assert [r.status for r in store.records] == ["passed"]


def test_without_a_gate_nothing_is_held_and_the_events_are_agnos(make_judge, make_agent, store):
    agent = make_agent(make_judge())
    plain = [type(e) for e in agent.run("hello there", stream=True, stream_events=True)]
    ours = [type(e) for e in judgehooks.stream(agent, "hello there", stream_events=True)]
    assert ours == plain
    assert [r.status for r in store.records] == ["passed", "passed"]


def test_a_team_gate_blocks_the_streamed_answer(make_judge, make_team, store):
    team = make_team(make_judge(gate=True, fallback=FALLBACK))
    events = list(judgehooks.stream(team, "stream me [[fail]]", stream_events=True, yield_run_output=False))
    assert "ECHO" not in seen(events)
    assert text(events) == FALLBACK and isinstance(events[-1], TeamRunCompletedEvent)
    assert [r.status for r in store.records] == ["failed"]


@pytest.mark.anyio
async def test_astream_on_a_team_passes_and_blocks(make_judge, make_team, store):
    team = make_team(make_judge(gate=True, fallback=FALLBACK))
    passed = [e async for e in judgehooks.astream(team, "where is my order", stream_events=True)]
    assert text(passed) == "ECHO: where is my order" and isinstance(passed[-1], TeamRunCompletedEvent)
    blocked = [e async for e in judgehooks.astream(team, "stream me [[fail]]", stream_events=True)]
    assert "ECHO" not in seen(blocked) and text(blocked) == FALLBACK
    assert [r.status for r in store.records] == ["passed", "failed"]


def test_a_repaired_stream_shows_only_the_repaired_answer(make_judge, make_agent, store):
    agent = make_agent(make_judge(repair=1, fallback=FALLBACK))
    events = list(judgehooks.stream(agent, "stream [[fail_first=1]]", stream_events=True))
    shown = text(events)
    assert "rejected the previous answer" in shown and shown == events[-1].content
    assert [r.status for r in store.records] == ["failed", "passed"]


def test_a_member_gate_in_a_team_stream_drops_the_members_text(make_judge, server, store):
    member = Agent(model=model(server), name="member", telemetry=False,
                   post_hooks=[make_judge(gate=True, fallback=FALLBACK)])
    from agno.team import Team

    team = Team(members=[member], model=model(server), telemetry=False)
    ask = "[[fail]] [[tool=delegate_task_to_member]] [[arg_member_id=member]]"
    plain = list(team.run(ask, stream=True, stream_events=True, stream_member_events=True))
    assert [e for e in plain if isinstance(e, RunContentEvent) and e.content]  # agno shows the member's text
    events = list(judgehooks.stream(team, ask, stream_events=True, stream_member_events=True))
    assert not [e for e in events if isinstance(e, RunContentEvent) and e.content]  # ours: never
    assert [r.status for r in store.records] == ["failed", "failed"]


def test_hold_all_holds_the_other_events_too_and_stream_false_is_refused(make_judge, make_agent, store):
    agent = make_agent(make_judge(gate=True, fallback=FALLBACK))
    events = list(judgehooks.stream(agent, "where is my order", stream_events=True, hold="all"))
    assert text(events) == "ECHO: where is my order" and isinstance(events[-1], RunCompletedEvent)
    with pytest.raises(ValueError, match="stream=True"):
        next(judgehooks.stream(agent, "q", stream=False))
    with pytest.raises(ValueError, match="hold must be"):
        next(judgehooks.stream(agent, "q", hold="none"))  # type: ignore[arg-type]


def test_in_a_team_stream_a_member_only_gate_does_not_keep_the_rejected_text_from_the_leader(make_judge, server,
                                                                                            store):
    """Pinned agno behaviour (docs/how-to/gates.md, "Streamed answers"): streamed, agno hands a member's
    streamed text to the leader before the member's gate has run, so the leader can quote what that
    gate rejected; not streamed, the leader gets the fallback. A gate on the team stops it."""
    from agno.team import Team

    def member() -> Agent:
        return Agent(model=model(server), name="member", telemetry=False,
                     post_hooks=[make_judge(gate=True, fallback=FALLBACK)])

    ask = "[[fail]] [[tool=delegate_task_to_member]] [[arg_member_id=member]]"
    team = Team(members=[member()], model=model(server), telemetry=False)
    assert "TOOL_RESULT: ECHO: [[fail]]" in text(list(judgehooks.stream(team, ask)))  # the leader quotes it
    assert team.run(ask).content.endswith(f"TOOL_RESULT: {FALLBACK}")  # not streamed: the fallback
    gated = Team(members=[member()], model=model(server), telemetry=False,
                 post_hooks=[make_judge(gate=True, fallback=FALLBACK)])
    events = list(judgehooks.stream(gated, ask))
    assert text(events) == FALLBACK and "ECHO" not in text(events)


# checkpoints: the text goes out in pieces once the gate's cheap checks pass on the text so far

SENTENCES = "Hello there. Where is my order? It is late"


def checked_gate(make_judge, store, **judge):
    """A gate whose cheap check (no "forbidden") runs before its LLM judge."""
    return judgehooks.Ordered([judgehooks.NotContains("forbidden"), make_judge(**judge)], gate=True,
                              fallback=FALLBACK, store=store)


def test_checkpoints_release_the_first_sentence_before_the_judge_is_asked(make_judge, make_agent, server, store):
    agent = make_agent(checked_gate(make_judge, store))
    asked_before = server.settings.counts["judge"]
    asked_at_first_content = None
    events = []
    for event in judgehooks.stream(agent, f"{SENTENCES} [[judge_delay=300]]", checkpoints="sentence"):
        if isinstance(event, RunContentEvent) and asked_at_first_content is None:
            asked_at_first_content = server.settings.counts["judge"] - asked_before
        events.append(event)
    assert asked_at_first_content == 0  # held until the verdict, it would come after the judge's request
    assert text(events) == f"ECHO: {SENTENCES} [[judge_delay=300]]"
    assert [r.status for r in store.records] == ["passed"]  # graded once, the whole answer


def test_a_check_failing_at_a_checkpoint_stops_the_release_and_the_fallback_replaces_the_rest(
        make_judge, make_agent, store, caplog):
    agent = make_agent(checked_gate(make_judge, store))
    with caplog.at_level(logging.WARNING):
        events = list(judgehooks.stream(agent, "Hello there. The forbidden word. More text here",
                                        checkpoints="sentence"))
    assert "stream_checkpoint_failed" in caplog.text
    assert text(events) == "ECHO: Hello there." + FALLBACK  # the first sentence had gone out; the rest never
    assert "forbidden" not in seen(events)
    assert isinstance(events[-1], RunCompletedEvent) and events[-1].content == FALLBACK
    assert [r.status for r in store.records] == ["failed"]


def test_without_checkpoints_or_without_a_cheap_check_nothing_goes_out_before_the_judge(make_judge, make_agent,
                                                                                         server, store):
    for agent, kwargs in [(make_agent(checked_gate(make_judge, store)), {}),
                          (make_agent(make_judge(gate=True, fallback=FALLBACK)), {"checkpoints": "sentence"})]:
        asked_before = server.settings.counts["judge"]
        for event in judgehooks.stream(agent, SENTENCES, **kwargs):
            if isinstance(event, RunContentEvent):
                assert server.settings.counts["judge"] > asked_before  # the verdict came first
                break
    with pytest.raises(ValueError, match="checkpoints must be"):
        next(judgehooks.stream(agent, "q", checkpoints="word"))  # type: ignore[arg-type]


def test_a_raising_finder_or_check_stops_the_release_without_crashing_the_stream(make_judge, make_agent, store,
                                                                                 caplog):
    def finder(so_far: str) -> int | None:
        raise RuntimeError("bad finder")

    agent = make_agent(checked_gate(make_judge, store))
    with caplog.at_level(logging.WARNING):
        events = list(judgehooks.stream(agent, SENTENCES, checkpoints=finder))
    assert text(events) == f"ECHO: {SENTENCES}"  # nothing early; the verdict released it all at the end
    assert "stream_checkpoint_failed" in caplog.text and "bad finder" in caplog.text

    class Raises(judgehooks.NotContains):
        def evaluate(self, ctx):
            raise RuntimeError("check broke")

    gate = judgehooks.Ordered([Raises("x"), make_judge()], gate=True, fallback=FALLBACK, store=store)
    events = list(judgehooks.stream(make_agent(gate), SENTENCES, checkpoints="sentence"))
    assert text(events) == FALLBACK  # the check's error is the gate's error at the end: nothing went out early


def test_sentence_ends_is_one_pass_over_hostile_text():
    from judgehooks._hooks.stream import sentence_ends

    assert sentence_ends("One. Two! Three? four") == 16
    assert sentence_ends("3.14 is pi") is None and sentence_ends("line\n") == 5
    assert sentence_ends("." * 200_000 + " x") == 200_000  # linear: no backtracking on model output


@pytest.mark.anyio
async def test_astream_checkpoints_release_early_and_stop_at_a_failing_check(make_judge, make_agent, server, store):
    agent = make_agent(checked_gate(make_judge, store))
    asked_before = server.settings.counts["judge"]
    first = None
    events = []
    async for event in judgehooks.astream(agent, SENTENCES, checkpoints="sentence"):
        if isinstance(event, RunContentEvent) and first is None:
            first = server.settings.counts["judge"] - asked_before
        events.append(event)
    assert first == 0 and text(events) == f"ECHO: {SENTENCES}"
    blocked = [e async for e in judgehooks.astream(agent, "Hi. The forbidden word. More", checkpoints="sentence")]
    assert text(blocked) == "ECHO: Hi." + FALLBACK
    assert [r.status for r in store.records] == ["passed", "failed"]


def test_checkpoints_then_a_repair_show_the_repaired_answer_once(make_judge, make_agent, make_team, server, store):
    gate = judgehooks.Ordered([judgehooks.NotContains("forbidden"), make_judge()], repair=1, fallback=FALLBACK,
                              store=store)
    before, first, events = server.settings.counts["judge"], None, []
    for event in judgehooks.stream(make_agent(gate), "Hello there. stream [[fail_first=1]]", checkpoints="sentence"):
        if isinstance(event, RunContentEvent) and first is None:
            first = server.settings.counts["judge"] - before
        events.append(event)
    shown = text(events)
    assert first == 0  # the first sentence went out before the judge was asked
    assert shown.startswith("ECHO: Hello there. stream") and "rejected the previous answer" in shown
    assert shown.count("ECHO: Hello there.") == 1  # the repaired answer starts with what had gone: only its rest
    team, first, events = make_team(checked_gate(make_judge, store)), None, []
    before = server.settings.counts["judge"]
    for event in judgehooks.stream(team, SENTENCES, checkpoints="sentence"):
        if isinstance(event, TeamRunContentEvent) and first is None:
            first = server.settings.counts["judge"] - before
        events.append(event)
    assert first == 0 and text(events) == f"ECHO: {SENTENCES}"  # a team's leader text is released too
