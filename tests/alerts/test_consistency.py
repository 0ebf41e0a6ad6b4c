"""`judgehooks consistency`: re-judging through the same judge settings; the re-judged records are
stored marked, and never change a pass rate."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _runner import CliResult, run_cli

from judgehooks import SQLiteStore
from judgehooks._cli.consistency import render

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def cli(*args: str) -> CliResult:
    return run_cli(*args)


def test_flip_rate_and_score_spread_and_an_unchanged_report(make_judge, server, tmp_path):
    db = tmp_path / "evals.db"
    store = SQLiteStore(db)
    ev = make_judge(name="helpful", scoring_strategy="numeric", threshold=7, store=store)
    # the stub judge gives the n-th call carrying [[scores=...]] the n-th score: 8 when graded, then 5, 8, 8
    ev.run(cases=[{"input": "q1 [[scores=8,5,8,8]]", "output": "a"}, {"input": "q2 [[score=9]]", "output": "b"},
                  {"input": "q3 [[score=2]]", "output": "c"}])
    store.close()
    before = json.loads(cli("report", "--store", str(db), "--since", "all", "--json").stdout)
    done = cli("consistency", "--store", str(db), "--evaluator", "helpful", "--sample", "3", "--repeats", "3",
               "--model", "openai/judge", "--api-base", server.base_url, "--api-key", "k", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["records"], result["rejudged"], result["errors"], result["flipped"]) == (3, 9, 0, 1)
    assert result["flip_rate"] == pytest.approx(1 / 3)
    assert result["agreement"] == pytest.approx(8 / 9)
    # per record: pstdev(8, 5, 8, 8) = 1.299..., and 0 for the steady two
    assert result["score_std_max"] == pytest.approx(1.299038, abs=1e-5)
    assert result["score_std_mean"] == pytest.approx(1.299038 / 3, abs=1e-5)
    assert result["rebuilt_version"] == result["version"] == ev.evaluator_version and result["notes"] == []
    # the table prints the same numbers (the docs show this table, from the local model)
    assert render(result).splitlines()[1:4] == [
        "flip rate: 33.3% (1 of 3 record(s) got different verdicts)",
        "agreement with the stored verdict: 88.9% of re-judgments",
        "score standard deviation per record: mean 0.43, max 1.30"]
    stored = SQLiteStore(db).query_sync(limit=None)
    assert len(stored) == 12 and sum(r.rejudge_of is not None for r in stored) == 9
    after = json.loads(cli("report", "--store", str(db), "--since", "all", "--json").stdout)
    assert after["total"] == before["total"] and after["groups"] == before["groups"]
    assert (before["rejudged"], after["rejudged"]) == (0, 9)
    text = cli("consistency", "--store", str(db), "--evaluator", "helpful", "--sample", "1", "--repeats", "1",
               "--model", "openai/other", "--api-base", server.base_url, "--api-key", "k")
    assert "flip rate:" in text.stdout and f"the records {ev.evaluator_version}" in text.stdout


# ---- any evaluator, from Python or --import ----------------------------------------------------

RUBRIC_MODULE = '''
from judgehooks import Criterion, Rubric

rubric = Rubric([Criterion("accurate", "Only facts from the question.")], model="openai/judge",
                api_base={base!r}, api_key="k", name="rubric", threshold=7)
'''


def rubric_records(server, db):
    """Rubric verdicts: one criterion, so the stub's [[scores=...]] gives each call of a case the next score."""
    from judgehooks import Criterion, Rubric

    store = SQLiteStore(db)
    rubric = Rubric([Criterion("accurate", "Only facts from the question.")], model="openai/judge",
                    api_base=server.base_url, api_key="k", name="rubric", threshold=7, store=store)
    rubric.run(cases=[{"input": "q1 [[scores=8,5,8,8]]", "output": "a"}, {"input": "q2 [[score=9]]", "output": "b"},
                      {"input": "q3 [[score=2]]", "output": "c"}])
    return rubric, store


def test_a_rubric_object_is_rejudged_from_python_and_its_rejudgments_are_marked(server, tmp_path):
    import judgehooks

    rubric, store = rubric_records(server, tmp_path / "evals.db")
    result = judgehooks.consistency(rubric, sample=3, repeats=3, store=store)
    assert (result.evaluator, result.records, result.rejudged, result.errors, result.flipped) == ("rubric", 3, 9, 0, 1)
    assert result.flip_rate == pytest.approx(1 / 3) and result.agreement == pytest.approx(8 / 9)
    assert result.score_std_max == pytest.approx(1.299038, abs=1e-5)
    assert result.version == result.rebuilt_version == rubric.evaluator_version and result.notes == []
    stored = store.query_sync(limit=None)
    assert sum(r.rejudge_of is not None for r in stored) == 9 and {r.evaluator for r in stored} == {"rubric"}
    with pytest.raises(LookupError, match="no graded records of evaluator 'nobody'"):
        judgehooks.consistency(rubric, name="nobody", store=store)
    with pytest.raises(ValueError, match="sample and repeats must be at least 1"):
        judgehooks.consistency(rubric, repeats=0, store=store)


def test_an_agno_judge_scorer_is_rejudged_from_python(server, make_agent, tmp_path):
    from agno.scorer import JudgeScorer
    from conftest import model

    import judgehooks
    from judgehooks import ScorerEval

    store = SQLiteStore(tmp_path / "evals.db")
    scorer = ScorerEval(JudgeScorer(model=model(server), criteria="Answers the question."), name="scored",
                        store=store)
    verdict = '[[raw]]{"passed": true, "reason": "it answers"}'
    scorer.run(cases=[{"input": "q1", "output": verdict}, {"input": "q2", "output": verdict}])
    result = judgehooks.consistency(scorer, sample=2, repeats=2, store=store)
    assert (result.records, result.rejudged, result.errors, result.flipped, result.agreement) == (2, 4, 0, 0, 1.0)
    assert sum(r.rejudge_of is not None for r in store.query_sync(limit=None)) == 4


def test_the_command_rejudges_an_imported_evaluator_and_says_which_cannot_be_rebuilt(server, tmp_path):
    db = tmp_path / "evals.db"
    rubric_records(server, db)[1].close()
    refused = cli("consistency", "--store", str(db), "--evaluator", "rubric", "--model", "openai/judge",
                  "--api-base", server.base_url, "--api-key", "k")
    assert refused.returncode == 1
    assert "cannot rebuild its judge: they are a Rubric's" in refused.stderr and "--import MODULE" in refused.stderr
    (tmp_path / "my_evals.py").write_text(RUBRIC_MODULE.format(base=server.base_url))
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path), ENV.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "judgehooks._cli", "consistency", "--store", str(db), "--evaluator",
                           "rubric", "--import", "my_evals", "--sample", "3", "--repeats", "3", "--json"],
                          capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["records"], result["rejudged"], result["flipped"], result["notes"]) == (3, 9, 1, [])
    wrong = subprocess.run([sys.executable, "-m", "judgehooks._cli", "consistency", "--store", str(db),
                            "--evaluator", "other", "--import", "my_evals"],
                           capture_output=True, text=True, timeout=180, env=env)
    assert wrong.returncode == 2 and "defines no evaluator named 'other' (it defines: rubric)" in wrong.stderr


def test_check_records_cannot_rebuild_a_judge_and_the_command_says_so(tmp_path):
    from judgehooks import Contains

    db = tmp_path / "evals.db"
    store = SQLiteStore(db)
    Contains("Paris", name="says-paris", store=store).run(cases=[{"input": "q", "output": "Paris"}])
    store.close()
    done = cli("consistency", "--store", str(db), "--evaluator", "says-paris")
    assert done.returncode == 1
    assert "they name no criteria: they come from a check, a ScorerEval, a function" in done.stderr
