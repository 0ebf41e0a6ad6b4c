"""Both directions with agno's suite runner: every judgehooks evaluator is an agno `Scorer`
(``await ev.ascore(run, expected)`` returns agno's ``Score``), so ``agno.eval.Case(scorer=ev)``
and agno's own ``run_cases`` grade with it, beside agno's own scorers, and each verdict is stored
like any other record. (The other direction, an agno Scorer as our evaluator, is `ScorerEval`.)"""

from __future__ import annotations

import asyncio

import pytest
from agno.eval import Case, run_cases
from agno.scorer import CodeScorer, Score, Scorer

from judgehooks import Contains, ExactMatch, SessionJudge, evaluator
from judgehooks.exceptions import EvaluatorError


def test_every_kind_of_evaluator_is_an_agno_scorer(make_judge, store):
    @evaluator(store=store)
    def short(ctx):
        return len(ctx.output) < 100

    for ev in (make_judge(), Contains("x", store=store), ExactMatch(store=store), short):
        assert isinstance(ev, Scorer), ev


def test_agnos_run_cases_grades_with_our_evaluators_beside_agnos_own_scorer(make_agent, make_judge, store):
    judge = make_judge(name="echo", scoring_strategy="numeric", threshold=7)
    exact = ExactMatch(name="exact", store=store)
    theirs = CodeScorer(lambda run, expected: run.content.strip() == expected)
    agent = make_agent(id="support", name="support")  # no post hooks: the suite runner scores
    cases = [Case(name="good", input="q1 [[score=9]]", agent=agent, scorer=judge),
             Case(name="bad", input="q2 [[score=2]]", agent=agent, scorer=judge),
             Case(name="broken", input="q3 [[judge_status=500]]", agent=agent, scorer=judge),
             Case(name="four", input="4 [[raw]]", agent=agent, scorer=exact, expected="4"),
             Case(name="five", input="4 [[raw]]", agent=agent, scorer=exact, expected="5"),
             Case(name="agno-four", input="4 [[raw]]", agent=agent, scorer=theirs, expected="4")]
    suite = run_cases(cases, default_timeout=60)
    by_name = {r.name: r for r in suite.results}

    good, bad, broken = by_name["good"], by_name["bad"], by_name["broken"]
    assert (good.passed, good.score.value, good.score.passed) == (True, 0.9, True)
    assert (bad.passed, bad.score.value, bad.score.passed) == (False, 0.2, False)
    # a judge error is the case's error (agno's runner: "scorer: ..."), never a failing score
    assert broken.score is None and broken.error.startswith("scorer: EvaluatorError: no verdict (error")
    assert (by_name["four"].passed, by_name["five"].passed, by_name["agno-four"].passed) == (True, False, True)
    # ours and agno's own scorer land in agno's result the same way
    assert type(by_name["four"].score) is type(by_name["agno-four"].score) is Score
    assert suite.to_dict()["cases"][3].keys() == suite.to_dict()["cases"][5].keys()
    assert suite.to_dict()["cases"][3]["score_value"] == suite.to_dict()["cases"][5]["score_value"] == 1.0

    # every verdict (and the judge error) is a stored record, like any other, named by the Score
    records = {r.id: r for r in store.records}
    assert sorted((r.evaluator, r.status) for r in records.values()) == [
        ("echo", "error"), ("echo", "failed"), ("echo", "passed"), ("exact", "failed"), ("exact", "passed")]
    assert all(r.agent_id == "support" for r in records.values())
    assert records[good.score.detail["record_id"]].run_id == good.response.run_id
    assert records[by_name["five"].score.detail["record_id"]].details["expected"] == "5"


def test_ascore_on_one_run_is_idempotent_and_raises_for_no_verdict(make_agent, make_judge, store):
    judge = make_judge(name="echo", scoring_strategy="numeric", threshold=7)
    run = make_agent().run("q [[score=8]]")
    first, again = asyncio.run(judge.ascore(run)), asyncio.run(judge.ascore(run))
    assert first == again and (first.value, first.passed) == (0.8, True)
    assert len(store.records) == 1  # the same run and evaluator: one record
    with pytest.raises(EvaluatorError, match="no verdict"):
        asyncio.run(ExactMatch(store=store).ascore(run))  # no expected value: an error record, stored
    assert sorted(r.status for r in store.records) == ["error", "passed"]


def test_a_session_judge_refuses_to_score_one_run(make_agent, server, store):
    judge = SessionJudge(criteria="c", model="openai/judge", api_base=server.base_url, api_key="k", store=store)
    run = make_agent().run("q")
    with pytest.raises(TypeError, match="whole conversations"):
        asyncio.run(judge.ascore(run))
