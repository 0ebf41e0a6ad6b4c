"""`calibrate`: the judge against human labels, checked against numbers worked out by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from _runner import run_cli

import judgehooks
from judgehooks import EvalRecord, Label, SQLiteStore
from judgehooks._base.agreement import Confusion, kappa_interval, ranks, rogan_gladen, spearman
from judgehooks._runtime import runtime

START = datetime(2026, 11, 1, tzinfo=UTC)

# (judge passed, human passed) for 10 labelled records: tp=4, fp=1, fn=2, tn=3
PAIRS = [(True, True)] * 4 + [(True, False)] + [(False, True)] * 2 + [(False, False)] * 3
# 10 more graded records nobody labelled, 6 of them passed: the judge passes 11 of 20 (raw 0.55)
UNLABELLED = [True] * 6 + [False] * 4


def binary_store(path) -> SQLiteStore:
    store = SQLiteStore(path)
    records, labels = [], []
    for i, (judge, human) in enumerate(PAIRS):
        records.append(EvalRecord(id=f"b{i}", created_at=START + timedelta(minutes=i), status="passed" if judge
                                  else "failed", passed=judge, evaluator="facts", evaluator_version="v2",
                                  mode="binary"))
        labels.append(Label(record_id=f"b{i}", reviewer="ann", passed=human))
    for i, judge in enumerate(UNLABELLED):
        records.append(EvalRecord(id=f"u{i}", created_at=START + timedelta(hours=1, minutes=i),
                                  status="passed" if judge else "failed", passed=judge, evaluator="facts",
                                  evaluator_version="v2", mode="binary"))
    # an older version, labelled: never mixed into v2's numbers
    records.append(EvalRecord(id="old", created_at=START - timedelta(days=1), status="failed", passed=False,
                              evaluator="facts", evaluator_version="v1", mode="binary"))
    labels.append(Label(record_id="old", reviewer="ann", passed=True))
    # two reviewers who disagree on one record: left out, counted as a tie
    records.append(EvalRecord(id="tie", created_at=START + timedelta(hours=2), status="passed", passed=True,
                              evaluator="facts", evaluator_version="v2", mode="binary"))
    labels += [Label(record_id="tie", reviewer="ann", passed=True), Label(record_id="tie", reviewer="bob",
                                                                           passed=False)]
    # a re-judged copy (judgehooks consistency): never counted
    records.append(EvalRecord(id="again", created_at=START + timedelta(hours=3), status="failed", passed=False,
                              evaluator="facts", evaluator_version="v2", mode="binary", rejudge_of="b0"))
    runtime.call(store.write, records)
    runtime.call(store.write_labels, labels)
    return store


def test_binary_numbers_match_the_hand_computed_ones(tmp_path):
    result = judgehooks.calibrate("facts", store=binary_store(tmp_path / "evals.db"))
    assert (result.version, result.versions, result.n, result.ties) == ("v2", ["v1", "v2"], 10, 1)
    assert (result.confusion.tp, result.confusion.fp, result.confusion.fn, result.confusion.tn) == (4, 1, 2, 3)
    assert result.accuracy == pytest.approx(0.7)
    assert result.true_pass_rate == pytest.approx(4 / 6) and result.true_fail_rate == pytest.approx(0.75)
    # po = 0.7; pe = (5 * 6 + 5 * 4) / 100 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5)
    assert result.kappa == pytest.approx(0.4)
    # the judge passes 12 of 21 graded v2 records (the tie's record included; the re-judged one not)
    assert result.graded == 21 and result.raw_pass_rate == pytest.approx(12 / 21)
    # Rogan-Gladen: (raw + 0.75 - 1) / (4/6 + 0.75 - 1)
    assert result.corrected_pass_rate == pytest.approx((12 / 21 - 0.25) / (4 / 6 - 0.25))
    low, high = result.kappa_ci
    assert low < 0.4 < high and -1 <= low and high <= 1
    assert result.kappa_ci == judgehooks.calibrate("facts", store=SQLiteStore(tmp_path / "evals.db")).kappa_ci
    assert result.too_small and "too small to conclude anything" in result.notes[0]
    assert any(note.startswith("version v2 of 2 (v1, v2)") for note in result.notes)
    older = judgehooks.calibrate("facts", version="v1", store=SQLiteStore(tmp_path / "evals.db"))
    assert (older.n, older.confusion.fn) == (1, 1)


def test_numeric_scores_give_spearman_and_mean_absolute_error(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    judge_scores, human_scores = [2, 4, 6, 8, 10], [1, 3, 2, 5, 4]
    records = [EvalRecord(id=f"n{i}", created_at=START + timedelta(minutes=i), status="passed" if s >= 7 else "failed",
                          passed=s >= 7, score=s, threshold=7, evaluator="helpful", evaluator_version="n1",
                          mode="numeric") for i, s in enumerate(judge_scores)]
    runtime.call(store.write, records)
    runtime.call(store.write_labels, [Label(record_id=f"n{i}", reviewer="ann", score=s)
                                      for i, s in enumerate(human_scores)])
    result = judgehooks.calibrate("helpful", store=store)
    # ranks: judge 1..5, people 1,3,2,5,4; sum d^2 = 4; rho = 1 - 6 * 4 / (5 * (25 - 1)) = 0.8
    assert result.spearman == pytest.approx(0.8)
    assert result.mae == pytest.approx((1 + 1 + 4 + 3 + 6) / 5)
    # scores under the threshold 7 count as human failures: the judge's two passes are false passes
    assert (result.confusion.fp, result.confusion.tn, result.scored) == (2, 3, 5)
    assert result.true_pass_rate is None and result.corrected_pass_rate is None
    assert any("label both kinds" in note for note in result.notes)


def test_the_statistics_on_their_own():
    assert ranks([10, 20, 20, 30]) == [1, 2.5, 2.5, 4]
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1)
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert Confusion(tp=5).kappa is None  # both always pass: agreement is all chance
    assert rogan_gladen(0.5, 0.5, 0.5) is None  # a coin-flip judge cannot correct anything
    assert rogan_gladen(0.9, 0.9, 0.9) == pytest.approx(1.0)
    many = PAIRS * 6
    assert kappa_interval(many, seed=1) == kappa_interval(many, seed=1) != kappa_interval(many, seed=2)


def test_the_kappa_interval_is_the_bootstrap_over_the_pairs():
    """Resampled as four kinds of pair and counted, the interval is the one resampling the pairs
    themselves gives (the textbook percentile bootstrap, written out here)."""
    import random

    pairs = PAIRS * 8
    rng, values = random.Random(7), []
    for _ in range(4000):
        kappa = Confusion.of([pairs[rng.randrange(len(pairs))] for _ in pairs]).kappa
        if kappa is not None:
            values.append(kappa)
    values.sort()
    textbook = (values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))])
    ours = kappa_interval(pairs, resamples=4000, seed=3)
    assert ours is not None
    assert ours[0] == pytest.approx(textbook[0], abs=0.04) and ours[1] == pytest.approx(textbook[1], abs=0.04)


def test_the_command_prints_a_table_and_json_with_the_same_numbers(tmp_path):
    binary_store(tmp_path / "evals.db").close()
    args = ["calibrate", "--store", str(tmp_path / "evals.db"), "--evaluator", "facts"]
    text = run_cli(*args)
    data = json.loads(run_cli(*args, "--json").stdout)
    assert text.returncode == 0, text.stderr
    assert data["kappa"] == pytest.approx(0.4) and data["confusion"] == {"tp": 4, "fp": 1, "fn": 2, "tn": 3}
    assert "Cohen's kappa   0.400  95% CI" in text.stdout
    assert "accuracy        70.0%  judge and people agree" in text.stdout
    assert "judge pass            4            1" in text.stdout
    assert "note: n=10 labelled records is too small to conclude anything" in text.stdout
    missing = run_cli(*args[:-1], "nobody")
    assert missing.returncode == 1 and "calibrate: no graded records of evaluator 'nobody'" in missing.stderr
