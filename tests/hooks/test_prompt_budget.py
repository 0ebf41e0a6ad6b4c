"""Issue 26, M3: the judge's whole prompt has one hard character budget, tool calls and team
members' runs included, for session and run-level judges alike; the cut is stated in the prompt
and on the record. Measured on the wire: the request body the loopback stub received over HTTP,
from real agno agents and teams through real litellm."""

from __future__ import annotations

import dataclasses

from test_sessions import make_session_judge

import judgehooks

__all__ = ("make_session_judge",)  # a fixture, used by name

BUDGET = 20_000


def wire(server) -> str:
    """The last judge request's messages as the stub received them (system and user together)."""
    return "".join(m["content"] for m in server.settings.judge_requests[-1]["messages"])


def test_large_tool_results_in_a_session_stay_within_the_budget(make_session_judge, make_agent, server):
    def lookup(text: str) -> str:
        """Look something up."""
        return "R" * 100_000

    judge = make_session_judge(transcript_budget=BUDGET, include_tool_calls=True, idle_after=300)
    agent = make_agent(judge, tools=[lookup])
    for i in range(8):  # 8 tool results of 100,000 characters: about 800,000 before this fix
        agent.run(f"turn {i} [[tool=lookup]]", session_id="s-tools")
    [record] = judgehooks.end_session("s-tools")
    prompt = wire(server)
    assert len(prompt) <= BUDGET
    assert f"this prompt was cut to its budget of {BUDGET} characters" in prompt
    assert "characters cut here by judgehooks" in prompt and "<<<TOOL-CALLS-" in prompt
    cut = record.details["prompt"]
    assert cut["budget"] == BUDGET and cut["chars"] <= BUDGET and cut["cut_chars"] > 380_000
    transcript = record.details["transcript"]
    assert transcript["chars"] > 800_000 and transcript["clipped"] is True and transcript["omitted_turns"] == [2, 7]
    assert record.status == "passed"  # the judge answered: the cut prompt is still graded


def test_two_thousand_member_runs_stay_within_the_budget(make_session_judge, make_team, server):
    team = make_team(id="team-1", name="support")
    out = team.run("delegate [[tool=delegate_task_to_member]] [[arg_member_id=member]]", session_id="s-members")
    [member] = out.member_responses
    # The team run as agno would hand it to a post hook after 2,000 delegations (about 1,000,000
    # characters of member runs before this fix)
    out.member_responses = [dataclasses.replace(member, run_id=f"m-{i}", content=f"member answer {i} " + "m" * 480)
                            for i in range(2000)]
    judge = make_session_judge(transcript_budget=BUDGET, idle_after=300)
    judge.post_check(out, team=team)
    [record] = judgehooks.end_session("s-members")
    prompt = wire(server)
    assert len(prompt) <= BUDGET and f"cut to its budget of {BUDGET} characters" in prompt
    assert "member answer 0 " in prompt and "member answer 1999 " in prompt  # the first and last members shown
    assert record.details["prompt"]["whole_chars"] > 1_000_000 and record.details["prompt"]["chars"] <= BUDGET


def test_a_run_level_judge_holds_its_prompt_to_the_default_budget(make_judge, make_agent, store, server):
    from judgehooks._judges.prompt import DEFAULT_PROMPT_BUDGET

    def lookup(text: str) -> str:
        """Look something up."""
        return "R" * 300_000

    judge = make_judge(include_tool_calls=True)
    out = make_agent(judge, tools=[lookup]).run("use a tool [[tool=lookup]] [[tool=lookup]]")
    [record] = store.records
    assert record.run_id == out.run_id and record.status == "passed"
    prompt = wire(server)
    assert len(prompt) <= DEFAULT_PROMPT_BUDGET and "characters cut here by judgehooks" in prompt
    assert record.details["prompt"]["whole_chars"] > DEFAULT_PROMPT_BUDGET


def test_a_prompt_within_its_budget_is_sent_whole_and_says_nothing(make_judge, make_agent, store, server):
    make_agent(make_judge(include_tool_calls=True)).run("a short question")
    assert "cut to its budget" not in wire(server) and "prompt" not in store.records[0].details


def test_a_budget_too_small_for_the_prompts_own_words_is_an_error_record(make_session_judge, make_agent, server):
    judge = make_session_judge(transcript_budget=300, idle_after=300)
    make_agent(judge).run("x" * 1000, session_id="s-tiny")
    [record] = judgehooks.end_session("s-tiny")
    assert record.status == "error" and "cannot hold the prompt's own words" in record.error_message
    assert server.settings.counts["judge"] == 0  # never sent over budget
