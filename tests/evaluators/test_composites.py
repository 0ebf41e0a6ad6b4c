"""Composites on real runs: weighted groups, ordered checks that decide before the judge, judge
ensembles with their spread, borderline re-asks and weighted rubrics (one judge call per criterion)."""

from __future__ import annotations

import pytest

from judgehooks import (
    Borderline,
    Contains,
    Criterion,
    Ensemble,
    Group,
    NotContains,
    Ordered,
    Regex,
    Rubric,
)


def only(store, run_id, evaluator):
    (record,) = [r for r in store.records if r.run_id == run_id and r.evaluator == evaluator]
    return record


def judge_calls(server) -> int:
    return server.settings.counts["judge"]


# ---- groups ----------------------------------------------------------------------------------

def test_group_weights_and_each_members_verdict(make_agent, make_judge, store):
    group = Group([(Regex("ECHO", name="echo"), 1), (Contains("France", name="france"), 3),
                   make_judge(name="judge", scoring_strategy="numeric")],
                  pass_rule="score", threshold=0.5, name="quality", store=store)
    out = make_agent(group).run("Capital of Spain? [[score=6]]")
    r = only(store, out.run_id, "quality")
    # (1 * 1.0 + 3 * 0.0 + 1 * 6/10) / 5
    assert (r.status, r.score, r.threshold) == ("failed", 0.32, 0.5)
    assert [(m["name"], m["status"], m["weight"]) for m in r.details["members"]] == [
        ("echo", "passed", 1.0), ("france", "failed", 3.0), ("judge", "failed", 1.0)]
    assert r.details["members"][2]["score"] == 6 and r.attempts == 1 and r.judge_model


def test_group_all_rule_fails_on_a_failure_even_if_another_member_errors(make_agent, make_judge, store):
    group = Group([NotContains("Spain", name="no-spain"), make_judge(name="judge", retries=0)], name="g",
                  store=store)
    agent = make_agent(group)
    failed = agent.run("Spain [[judge_status=500]]")
    errored = agent.run("Italy [[judge_status=500]]")
    assert only(store, failed.run_id, "g").status == "failed"
    r = only(store, errored.run_id, "g")
    assert (r.status, r.error_type) == ("error", "MemberError") and "'judge' errored" in r.error_message
    assert r.details["members"][1]["status"] == "error"


def test_group_settings_are_checked():
    with pytest.raises(ValueError, match="pass_rule='score' needs threshold="):
        Group([Regex("a")], pass_rule="score")
    with pytest.raises(ValueError, match="pass_rule must be one of 'all', 'any', 'score'"):
        Group([Regex("a")], pass_rule="most")
    with pytest.raises(TypeError, match=r"members\[1\] must be a judgehooks Evaluator"):
        Group([Regex("a"), "b"])
    with pytest.raises(ValueError, match="several members named \\['x'\\]"):
        Group([Regex("a", name="x"), Regex("b", name="x")])


# ---- ordered checks ---------------------------------------------------------------------------

def test_ordered_cheap_check_decides_before_any_judge_call(make_agent, make_judge, store, server):
    ordered = Ordered([NotContains("sorry", case_sensitive=False, name="no-apology"),
                       make_judge(name="judge", scoring_strategy="numeric")], name="gate", store=store)
    agent = make_agent(ordered)
    refused = agent.run("Sorry, I cannot [[score=9]]")
    assert judge_calls(server) == 0
    r = only(store, refused.run_id, "gate")
    assert (r.status, r.details["decided_by"], r.details["not_run"]) == ("failed", "no-apology", ["judge"])
    assert r.reason == "no-apology: found ['sorry']" and r.mode == "numeric" and r.threshold == 7

    answered = agent.run("Paris [[score=9]]")
    assert judge_calls(server) == 1
    r = only(store, answered.run_id, "gate")
    assert (r.status, r.score, r.details["decided_by"]) == ("passed", 9, "judge")
    assert [c["status"] for c in r.details["checks"]] == ["passed", "passed"]


def test_ordered_judge_error_is_an_error_record_naming_the_check(make_agent, make_judge, store):
    ordered = Ordered([Regex(".", name="any"), make_judge(name="judge", retries=0)], name="gate", store=store)
    out = make_agent(ordered).run("q [[judge_status=500]]")
    r = only(store, out.run_id, "gate")
    assert r.status == "error" and r.details["decided_by"] == "judge" and r.error_type != "MemberError"


# ---- ensembles ----------------------------------------------------------------------------------

def test_ensemble_of_k_samples_stores_the_spread(make_agent, make_judge, store, server):
    ensemble = Ensemble(make_judge(name="judge", scoring_strategy="numeric", threshold=7), samples=3,
                        name="ens", store=store)
    out = make_agent(ensemble).run("q [[scores=4,8,9]]")
    r = only(store, out.run_id, "ens")
    assert judge_calls(server) == 3
    assert sorted(s["score"] for s in r.details["samples"]) == [4, 8, 9]
    assert (r.status, r.score, r.threshold, r.details["spread"]) == ("passed", 7.0, 7, 5)
    assert r.attempts == 3


def test_ensemble_of_several_models_by_majority(make_agent, make_judge, store):
    judges = [make_judge(name=f"judge-{m}", model=f"openai/judge-{m}") for m in ("a", "b", "c")]
    ensemble = Ensemble(judges, aggregate="majority", name="panel", store=store)
    out = make_agent(ensemble).run("q")
    r = only(store, out.run_id, "panel")
    assert r.status == "passed" and r.details["votes"] == {"passed": 3, "failed": 0}
    assert {s["name"] for s in r.details["samples"]} == {"judge-a", "judge-b", "judge-c"}
    assert r.judge_model == "judge-a,judge-b,judge-c"


def test_ensemble_needs_a_quorum_and_never_counts_errors_as_failures(make_agent, make_judge, store, server):
    ensemble = Ensemble(make_judge(name="judge", retries=0), samples=3, aggregate="majority", name="ens",
                        store=store)
    server.configure(judge_fail_next=1)
    one_down = make_agent(ensemble).run("q")
    r = only(store, one_down.run_id, "ens")
    assert r.status == "passed" and r.details["errors"] == 1 and r.details["votes"] == {"passed": 2, "failed": 0}
    server.configure(judge_fail_next=2)
    two_down = make_agent(ensemble).run("q2")
    r = only(store, two_down.run_id, "ens")
    assert (r.status, r.error_type) == ("error", "MemberError") and "only 1 of 3 samples" in r.error_message


def test_ensemble_settings_are_checked(make_judge):
    with pytest.raises(ValueError, match="at least two samples"):
        Ensemble(make_judge())
    with pytest.raises(ValueError, match="aggregate='mean' needs numeric judges"):
        Ensemble(make_judge(name="b"), samples=2)
    with pytest.raises(ValueError, match="aggregate must be one of 'mean', 'majority'"):
        Ensemble(make_judge(), samples=2, aggregate="median")


# ---- borderline --------------------------------------------------------------------------------

def test_borderline_asks_again_only_near_the_threshold(make_agent, make_judge, store, server):
    check = Borderline(make_judge(name="judge", scoring_strategy="numeric", threshold=7), margin=1,
                       extra_samples=2, name="bl", store=store)
    agent = make_agent(check)
    clear = agent.run("clear [[score=3]]")
    assert judge_calls(server) == 1
    r = only(store, clear.run_id, "bl")
    assert (r.status, r.score, r.details["reasked"]) == ("failed", 3, False)

    close = agent.run("close [[scores=7,5,5]]")  # 7 would pass alone; asked twice more it does not
    assert judge_calls(server) == 4
    r = only(store, close.run_id, "bl")
    assert (r.status, r.details["reasked"], r.details["first_score"]) == ("failed", True, 7)
    assert r.score == pytest.approx(17 / 3, abs=1e-3) and r.details["spread"] == 2


def test_borderline_needs_a_numeric_judge(make_judge):
    with pytest.raises(ValueError, match="Borderline needs a numeric judge with a threshold"):
        Borderline(make_judge(scoring_strategy="binary"))


# ---- rubric ------------------------------------------------------------------------------------

def rubric(server, store, criteria, **kwargs):
    return Rubric(criteria, model="openai/judge", api_base=server.base_url, api_key="k", store=store,
                  retry_backoff=0.01, name="rubric", **kwargs)


def test_rubric_stores_each_criterion_and_the_weighted_score(make_agent, store, server):
    check = rubric(server, store, [Criterion("accurate", "Only facts from the question. [[score=9]]", weight=3),
                                   Criterion("concise", "One sentence. [[score=5]]")], threshold=7)
    out = make_agent(check).run("Capital of France?")
    r = only(store, out.run_id, "rubric")
    assert judge_calls(server) == 2
    assert (r.status, r.score, r.threshold, r.mode) == ("passed", 8.0, 7, "numeric")
    assert [(c["name"], c["score"], c["weight"], c["reason"]) for c in r.details["criteria"]] == [
        ("accurate", 9, 3.0, "stub judge gave 9"), ("concise", 5, 1.0, "stub judge gave 5")]
    assert r.metadata["criteria"] == "accurate (x3); concise (x1)"


def test_rubric_minimum_per_criterion_fails_a_good_average(make_agent, store, server):
    check = rubric(server, store, [{"name": "accurate", "description": "Facts. [[score=10]]", "weight": 3},
                                   {"name": "safe", "description": "Safe. [[score=4]]", "min_score": 6}])
    r = only(store, make_agent(check).run("q").run_id, "rubric")
    assert (r.status, r.score) == ("failed", 8.5) and "under their minimum: ['safe']" in r.reason


def test_rubric_criterion_the_judge_cannot_grade_is_an_error(make_agent, store, server):
    check = rubric(server, store, {"accurate": "Facts. [[score=9]]", "broken": "Style. [[judge_malformed]]"},
                   retries=0)
    r = only(store, make_agent(check).run("q").run_id, "rubric")
    assert (r.status, r.error_type) == ("error", "MemberError") and "criterion 'broken' errored" in r.error_message
    assert [c["status"] for c in r.details["criteria"]] == ["passed", "error"]


def test_rubric_settings_are_checked(server):
    with pytest.raises(ValueError, match="criteria names must be distinct"):
        Rubric([Criterion("a", "x"), Criterion("a", "y")], model="openai/judge")
    with pytest.raises(ValueError, match="min_score of criterion 'a' must be an integer from 1 to 10"):
        Criterion("a", "x", min_score=11)
    with pytest.raises(ValueError, match=r"criteria\[0\]: .*unexpected keyword argument 'wieght'"):
        Rubric([{"name": "a", "description": "x", "wieght": 2}], model="openai/judge")
