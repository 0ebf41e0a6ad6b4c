"""`judgehooks consistency`: re-judging through the same judge settings; the re-judged records are
stored marked, and never change a pass rate."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from judgehooks import SQLiteStore

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "judgehooks._cli", *args], capture_output=True, text=True,
                          timeout=180, env=ENV)


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
    stored = SQLiteStore(db).query_sync(limit=None)
    assert len(stored) == 12 and sum(r.rejudge_of is not None for r in stored) == 9
    after = json.loads(cli("report", "--store", str(db), "--since", "all", "--json").stdout)
    assert after["total"] == before["total"] and after["groups"] == before["groups"]
    assert (before["rejudged"], after["rejudged"]) == (0, 9)
    text = cli("consistency", "--store", str(db), "--evaluator", "helpful", "--sample", "1", "--repeats", "1",
               "--model", "openai/other", "--api-base", server.base_url, "--api-key", "k")
    assert "flip rate:" in text.stdout and f"the records {ev.evaluator_version}" in text.stdout
