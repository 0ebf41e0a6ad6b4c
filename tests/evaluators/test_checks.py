"""Deterministic checks on real agno runs (agents and teams against the loopback server, real
tool calls): no judge call is made, every check ends as one stored record."""

from __future__ import annotations

import pytest
from agno.agent import Agent
from agno.team import Team
from conftest import model
from pydantic import BaseModel

from judgehooks import (
    Budget,
    Contains,
    ExactMatch,
    IsJSON,
    JSONSchema,
    LabelMatch,
    MatchesModel,
    NotContains,
    Regex,
    ScorerEval,
    ToolUse,
)


def lookup(text: str) -> str:
    """Look a fact up."""
    return "Paris is the capital of France"


def summarise(text: str) -> str:
    """Summarise a text."""
    return "short"


def broken(text: str) -> str:
    """A tool that always fails."""
    raise RuntimeError("backend down")


def records(store, run_id):
    return {r.evaluator: r for r in store.records if r.run_id == run_id}


def judge_calls(server) -> int:
    return server.settings.counts["judge"]


# ---- text -----------------------------------------------------------------------------------

def test_text_checks_pass_and_fail_on_a_real_run(make_agent, store, server):
    checks = [Regex(r"capital of \w+", name="re", store=store),
              Regex(r"sorry", flags="i", must_match=False, name="no-sorry", store=store),
              Contains(["ECHO", "France"], name="has-all", store=store),
              Contains(["Spain", "Italy"], require="any", name="has-any", store=store),
              NotContains(["France"], case_sensitive=False, name="no-france", store=store)]
    out = make_agent(*checks).run("What is the capital of FRANCE?")
    got = records(store, out.run_id)
    assert {name: r.status for name, r in got.items()} == {
        "re": "passed", "no-sorry": "passed", "has-all": "failed", "has-any": "failed", "no-france": "failed"}
    assert got["has-all"].details == {"present": ["ECHO"], "missing": ["France"]}
    assert got["no-france"].reason == "found ['France']"
    assert got["re"].mode == "binary" and got["re"].judge_model is None and got["re"].attempts == 0
    assert judge_calls(server) == 0


@pytest.mark.anyio
async def test_exact_match_reads_expected_from_run_metadata(make_agent, store):
    check = ExactMatch(name="exact", store=store, case_sensitive=False)
    agent = make_agent(check)
    ok = await agent.arun("[[raw]] Paris", metadata={"expected": "paris"})
    wrong = await agent.arun("[[raw]] Lyon", metadata={"expected": "paris"})
    missing = await agent.arun("[[raw]] Lyon")
    assert records(store, ok.run_id)["exact"].status == "passed"
    assert records(store, wrong.run_id)["exact"].reason == "expected 'paris'"
    r = records(store, missing.run_id)["exact"]
    assert (r.status, r.error_type) == ("error", "MissingExpected") and "metadata={'expected'" in r.error_message


def test_label_match_finds_the_label_as_a_whole_word(make_agent, store):
    check = LabelMatch(["positive", "negative", "neutral"], name="label", store=store)
    agent = make_agent(check)
    right = agent.run("[[raw]] Sentiment: Negative, clearly.", metadata={"expected": "negative"})
    none = agent.run("[[raw]] non-negativeish", metadata={"expected": "negative"})
    assert records(store, right.run_id)["label"].details == {"label": "negative", "expected": "negative"}
    r = records(store, none.run_id)["label"]
    assert (r.status, r.reason) == ("failed", "no label in the output")


# ---- structured output --------------------------------------------------------------------------

class City(BaseModel):
    city: str
    temp: int


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
          "required": ["city", "temp"]}


def test_json_checks_on_real_outputs(make_agent, store):
    checks = [IsJSON(name="json", store=store), JSONSchema(SCHEMA, name="schema", store=store),
              MatchesModel(City, name="model", store=store)]
    agent = make_agent(*checks)
    good = agent.run('[[raw]] {"city": "Paris", "temp": 21}')
    bad_type = agent.run('[[raw]] {"city": "Paris", "temp": "warm"}')
    prose = agent.run("[[raw]] It is warm in Paris")
    assert {n: r.status for n, r in records(store, good.run_id).items()} == {
        "json": "passed", "schema": "passed", "model": "passed"}
    typed = records(store, bad_type.run_id)
    assert typed["json"].status == "passed"
    assert typed["schema"].status == "failed" and typed["schema"].reason == "temp: 'warm' is not of type 'integer'"
    assert typed["model"].status == "failed"
    assert typed["model"].reason.startswith("temp: Input should be a valid integer")
    assert all(r.status == "failed" and r.reason.startswith("not JSON")
               for r in records(store, prose.run_id).values())


def test_invalid_schema_is_refused_at_construction():
    with pytest.raises(ValueError, match="schema is not a valid JSON schema: 'strng' is not valid"):
        JSONSchema({"type": "strng"})


# ---- tool trajectory ----------------------------------------------------------------------------

def test_tool_use_called_succeeded_and_in_order(make_agent, store):
    checks = [ToolUse(["lookup", "summarise"], in_order=True, name="order", store=store),
              ToolUse(["summarise", "lookup"], in_order=True, name="wrong-order", store=store),
              ToolUse(["broken"], name="broken-ok", store=store),
              ToolUse(["broken"], succeeded=False, name="broken-called", store=store),
              ToolUse(forbidden=["broken"], name="no-broken", store=store)]
    agent = make_agent(*checks, tools=[lookup, summarise, broken])
    out = agent.run("go [[tools=lookup,summarise,broken]]")
    got = records(store, out.run_id)
    assert got["order"].status == "passed"
    assert [c["name"] for c in got["order"].details["calls"]] == ["lookup", "summarise", "broken"]
    assert got["wrong-order"].reason == "called in the order ['lookup', 'summarise'], required ['summarise', 'lookup']"
    assert got["broken-ok"].reason == "not called successfully: ['broken'] (['broken'] errored)"
    assert got["broken-called"].status == "passed"
    assert got["no-broken"].reason == "forbidden tools called: ['broken']"


def test_team_member_tool_calls_count(server, store):
    member = Agent(model=model(server), name="researcher", id="researcher", tools=[lookup], telemetry=False)
    check = ToolUse(["delegate_task_to_member", "lookup"], in_order=True, name="team-tools", store=store)
    team = Team(members=[member], model=model(server), post_hooks=[check], telemetry=False, id="team-1")
    out = team.run("capital? [[tools=delegate_task_to_member,lookup]] [[member=researcher]]")
    r = records(store, out.run_id)["team-tools"]
    assert r.status == "passed" and r.team_id == "team-1"
    assert [(c["name"], c["agent_id"]) for c in r.details["calls"]] == [
        ("delegate_task_to_member", None), ("lookup", "researcher")]


# ---- budgets ------------------------------------------------------------------------------------

def test_budget_reads_tokens_latency_and_cost_from_run_metrics(make_agent, store):
    checks = [Budget(max_tokens=10_000, max_latency_ms=60_000, max_cost_usd=0.01, name="roomy", store=store),
              Budget(max_tokens=5, name="tight", store=store)]
    out = make_agent(*checks).run("hello [[cost=0.004]]")
    got = records(store, out.run_id)
    roomy = got["roomy"]
    assert roomy.status == "passed" and roomy.details["cost_usd"] == {"limit": 0.01, "actual": 0.004}
    assert roomy.details["total_tokens"]["actual"] > 5 and roomy.details["latency_ms"]["actual"] > 0
    assert got["tight"].status == "failed" and got["tight"].reason.startswith("total_tokens ")


def test_budget_without_reported_cost_is_an_error_not_a_pass(make_agent, store):
    out = make_agent(Budget(max_cost_usd=1.0, name="cost", store=store)).run("no cost reported")
    r = records(store, out.run_id)["cost"]
    assert (r.status, r.error_type) == ("error", "MissingMetrics") and "no cost_usd" in r.error_message


def test_a_budgets_max_cost_usd_is_the_runs_limit_not_a_spend_cap(make_agent, store):
    """`Budget(max_cost_usd=...)` limits what the run cost; it no longer doubles as the spend cap
    of the same name (which would skip later runs as `budget` once a window's cost passed it)."""
    from judgehooks._evaluators.spec import rebuild

    check = Budget(max_cost_usd=0.001, name="cost", store=store)
    assert check.hook_settings.max_cost_usd is None
    outs = [make_agent(check).run("hello [[cost=0.004]]") for _ in range(3)]
    got = [records(store, out.run_id)["cost"] for out in outs]
    assert [(r.status, r.reason) for r in got] == [("failed", "cost_usd 0.004 > 0.001")] * 3
    assert Budget(max_cost_usd=0.5).evaluator_version != Budget(max_cost_usd=0.001).evaluator_version
    again = rebuild(check.spec())  # as a worker or `resume` rebuilds it: the limit travels
    assert again.max_cost_usd == 0.001 and again.hook_settings.max_cost_usd is None
    check.max_cost_usd = 0.01  # assigned later: the check's limit changes, and no cap appears
    assert check.limits["cost_usd"] == 0.01 and check.hook_settings.max_cost_usd is None
    capped = Budget(max_tokens=10, max_calls=5)  # the other caps still apply to a Budget
    assert capped.hook_settings.max_calls == 5


@pytest.mark.parametrize("kwargs, message", [
    ({}, "Budget needs at least one of"),
    ({"max_tokens": 1.5}, "max_tokens must be an integer"),
    ({"max_cost_usd": -1}, "max_cost_usd must be a number >= 0"),
])
def test_budget_settings_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Budget(**kwargs)


# ---- agno's own scorers -------------------------------------------------------------------------

def test_agno_scorers_as_evaluators(server, store):
    from agno.scorer import CodeScorer, ToolCallScorer

    tools = ScorerEval(ToolCallScorer(["lookup"]), name="agno-tools", store=store)
    code = ScorerEval(CodeScorer(lambda run, expected: expected.lower() in run.content.lower()),
                      name="agno-code", store=store)
    member = Agent(model=model(server), name="researcher", id="researcher", tools=[lookup], telemetry=False)
    team = Team(members=[member], model=model(server), post_hooks=[tools, code], telemetry=False)
    out = team.run("capital? [[tools=delegate_task_to_member,lookup]] [[member=researcher]]",
                   metadata={"expected": "PARIS"})
    got = records(store, out.run_id)
    # agno's ToolCallScorer alone sees only the leader's tools; through the snapshot members count.
    assert (got["agno-tools"].status, got["agno-tools"].score) == ("passed", 1.0)
    assert (got["agno-code"].status, got["agno-code"].score, got["agno-code"].mode) == ("passed", 1.0, "numeric")


def test_a_scorer_that_raises_is_an_error_record(make_agent, store):
    from agno.scorer import CodeScorer

    check = ScorerEval(CodeScorer(lambda run, expected: 3.0), name="out-of-range", store=store)
    out = make_agent(check).run("q")
    r = records(store, out.run_id)["out-of-range"]
    assert (r.status, r.error_type) == ("error", "ValueError") and "[0, 1]" in r.error_message


# ---- hostile output against a user's pattern (ReDoS) -----------------------------------------------

def _re2_or_skip() -> None:
    import os

    try:
        import re2  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs the dev extra, which includes google-re2")
        pytest.skip("google-re2 is not installed: pip install 'judgehooks[re2]'")


def test_a_catastrophic_pattern_is_stopped_by_its_timeout_and_grading_goes_on(make_agent, store):
    """`(a|aa)+$` takes exponential time in a backtracking engine on 'a' * 60 + '!' (Python's `re`
    never returns); the search is stopped, the record says why, and the next run is graded."""
    slow = Regex(r"(a|aa)+$", name="redos", timeout=0.2, store=store)
    nested = Regex(r"(a+)+$", name="nested", timeout=0.2, store=store)
    agent = make_agent(slow, nested)
    hostile = agent.run("a" * 60 + "!")
    later = agent.run("aaaa")
    got = records(store, hostile.run_id)
    assert (got["redos"].status, got["redos"].error_type) == ("error", "TimeoutError")
    assert "did not finish within 0.2s" in got["redos"].error_message and "engine='re2'" in got["redos"].error_message
    assert got["nested"].status in ("failed", "error")  # never a pass, never a stall
    assert {r.status for r in records(store, later.run_id).values()} == {"passed"}


def test_the_re2_engine_matches_catastrophic_patterns_in_linear_time(make_agent, store):
    _re2_or_skip()
    checks = [Regex(r"(a|aa)+$", name="redos", engine="re2", store=store),
              Regex(r"ÉCHO: A+", flags="i", name="unicode", engine="re2", store=store)]
    agent = make_agent(*checks)
    hostile, plain = agent.run("a" * 60 + "!"), agent.run("aaaa")
    assert records(store, hostile.run_id)["redos"].status == "failed"
    assert {n: r.status for n, r in records(store, plain.run_id).items()} == {"redos": "passed", "unicode": "failed"}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"engine": "pcre"}, "engine must be one of 'regex', 're2'"),
    ({"timeout": 0}, "timeout must be a number > 0"),
    ({"pattern": "(a"}, "is not a valid regular expression"),
])
def test_regex_safety_settings_are_checked_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Regex(**{"pattern": "a", **kwargs})


def test_re2_refuses_what_it_cannot_match_in_linear_time():
    _re2_or_skip()
    with pytest.raises(ValueError, match="not supported by engine='re2'"):
        Regex(r"(a)\1", engine="re2")
    with pytest.raises(ValueError, match="flag 'x'"):
        Regex("a", flags="x", engine="re2")


def test_a_slow_regex_search_does_not_hold_up_other_grading():
    """Searches run off the judgehooks loop without the GIL: a quick check finishes while a
    catastrophic one is still searching."""
    import threading

    import judgehooks

    slow = judgehooks.Regex(r"(a|aa)+$", timeout=8, name="slow", store=judgehooks.MemoryStore())
    quick = judgehooks.Regex(r"b", name="quick", store=judgehooks.MemoryStore())
    done: list[str] = []
    grading = threading.Thread(target=lambda: done.append(slow.run(input="q", output="a" * 60 + "!").results[0].status))
    grading.start()
    assert quick.run(input="q", output="b").results[0].status == "passed"
    assert done == []  # the quick verdict came while the slow search still ran
    grading.join()
    assert done == ["error"]
