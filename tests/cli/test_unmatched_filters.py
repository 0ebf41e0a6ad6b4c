"""`--agent-id support-bot` on a store of an unnamed agent finds nothing: "no records" names the filter
that matched nothing, what the store holds, and how to give the agent an id of one's choosing. agno
itself is asked what id it gives (`Agent.set_id`)."""

from __future__ import annotations

import json

import pytest
from _runner import run_cli
from agno.agent import Agent
from agno.models.openai.like import OpenAILike

from judgehooks import SQLiteStore


def graded(make_judge, server, db, **agent):
    store = SQLiteStore(db)
    Agent(model=OpenAILike(id="agent", base_url=server.base_url, api_key="k"),
          post_hooks=[make_judge(name="helpful", store=store)], telemetry=False, **agent).run("hello")
    [record] = store.query_sync(limit=None)
    store.close()
    return record


@pytest.fixture
def unnamed(make_judge, server, tmp_path):
    """Records of an agent built with neither id= nor name=: stored under an id derived from it."""
    db = tmp_path / "evals.db"
    record = graded(make_judge, server, db)
    assert record.agent_name is None and record.agent_id.startswith("unnamed-agent-")
    return db, record


def test_report_names_the_agent_filter_that_matched_nothing_and_how_to_name_the_agent(unnamed):
    db, record = unnamed
    done = run_cli("report", "--store", str(db), "--since", "all", "--agent-id", "support-bot")
    assert done.returncode == 0, done.stderr
    assert "no records in this window" not in done.stdout
    assert (f"no records for agent 'support-bot' (agents in the store: {record.agent_id}); --agent-id takes the "
            "agent's id, and one built with neither id= nor name= is stored under unnamed-agent-<hash of its "
            "model, instructions and tools>, which changes when they do: give it one, e.g. "
            "Agent(name='support-bot', ...) (agno derives the id from the name) or "
            "Agent(id='support-bot', ...)") in done.stdout
    named = Agent(name="support-bot")  # as the message says: the name gives the id the filter takes
    named.set_id()
    assert named.id == "support-bot"
    as_json = json.loads(run_cli("report", "--store", str(db), "--agent-id", "support-bot", "--json").stdout)
    assert as_json["unmatched"].startswith("no records for agent 'support-bot'")


def test_report_blames_the_window_only_when_every_filter_matches_some_record(unnamed):
    db, record = unnamed
    done = run_cli("report", "--store", str(db), "--since", "all", "--until", "2000-01-01",
                   "--agent-id", record.agent_id)
    assert done.returncode == 0, done.stderr
    assert "no records in this window matching the filters" in done.stdout


def test_an_unknown_evaluator_lists_the_stores_evaluators(unnamed):
    db, _ = unnamed
    done = run_cli("report", "--store", str(db), "--evaluator", "helpfull")
    assert "no records for evaluator 'helpfull' (evaluators in the store: helpful)" in done.stdout


def test_a_name_given_as_the_filter_points_to_the_id(make_judge, server, tmp_path):
    record = graded(make_judge, server, tmp_path / "evals.db", name="Support Bot")
    assert record.agent_id == "support-bot"
    done = run_cli("report", "--store", str(tmp_path / "evals.db"), "--agent-id", "Support Bot")
    assert ("no records for agent 'Support Bot' (agents in the store: support-bot (Support Bot)); 'Support Bot' "
            "is the name of agent support-bot: --agent-id takes the id, e.g. --agent-id support-bot") in done.stdout


def test_tail_says_which_filter_matched_nothing(unnamed):
    db, record = unnamed
    done = run_cli("tail", "--store", str(db), "--no-follow", "--agent-id", "support-bot")
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.startswith(f"judgehooks: tail: no records for agent 'support-bot' (agents in the store: "
                                  f"{record.agent_id}); --agent-id takes")
