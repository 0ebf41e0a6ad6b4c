"""Offline grading: run(), arun(), and concurrent batches with honest statistics."""

from __future__ import annotations

import time

import pytest


def test_single_case(make_judge, store):
    result = make_judge(scoring_strategy="numeric").run(input="q", output="a [[score=9]]")
    [r] = result.records
    assert (r.status, r.score, result.pass_rate, result.avg_score) == ("passed", 9, 100.0, 9)
    assert store.records == [r] and r.run_id == result.run_id


def test_batch_statistics_exclude_errors_and_report_them(make_judge):
    cases = [{"input": f"q{i}", "output": f"a [[score={s}]]"} for i, s in enumerate([9, 8, 3])]
    cases += [{"input": "q", "output": "a [[judge_status=500]]"}, {"input": "q", "output": "[[judge_malformed]]"}]
    result = make_judge(scoring_strategy="numeric", retries=1).run(cases=cases)
    assert [r.status for r in result.records] == ["passed", "passed", "failed", "error", "error"]
    assert result.graded_count == 3 and result.error_count == 2
    assert result.pass_rate == pytest.approx(200 / 3)
    assert (result.min_score, result.max_score) == (3, 9) and result.avg_score == pytest.approx(20 / 3)
    assert len(result.errors) == 2 and result.results is result.records


def test_batch_runs_concurrently_and_bounded(make_judge, server):
    server.configure(judge_delay_ms=100)
    cases = [{"input": f"q{i}", "output": "a"} for i in range(40)]
    started = time.perf_counter()
    result = make_judge(max_concurrency=20).run(cases=cases)
    elapsed = time.perf_counter() - started
    assert len(result.records) == 40 and all(r.status == "passed" for r in result.records)
    assert elapsed < 40 * 0.1  # far below one-at-a-time; the benchmark measures the real rate


def test_expected_output_reaches_the_judge(make_judge, store):
    result = make_judge().run(input="2+2?", output="4", expected_output="4")
    assert result.records[0].status == "passed"


@pytest.mark.anyio
async def test_arun_batch(make_judge):
    result = await make_judge().arun(cases=[{"input": "a", "output": "b"}, {"input": "c", "output": "d [[fail]]"}])
    assert [r.status for r in result.records] == ["passed", "failed"] and result.pass_rate == 50.0


def test_record_ids_are_unique_per_case_and_deterministic(make_judge):
    from judgehooks._base.record import record_id

    judge = make_judge(name="batch")
    result = judge.run(cases=[{"input": "a", "output": "b"}] * 3)
    assert [r.id for r in result.records] == [record_id("batch", f"{result.run_id}:{i}", i,
                                                        version=judge.evaluator_version) for i in range(3)]


def test_each_case_of_a_batch_has_a_run_id_of_its_own_derived_from_the_batch(make_judge, store):
    result = make_judge().run(cases=[{"input": "same", "output": "same"}] * 3)
    assert [r.run_id for r in result.records] == [f"{result.run_id}:{i}" for i in range(3)]
    for record in result.records:  # a case's run id finds that case's record and no other
        assert [r for r in store.records if r.run_id == record.run_id] == [record]


@pytest.mark.parametrize("kwargs, message", [
    ({}, "provide input and output"),
    ({"input": "a"}, "both input and output"),
    ({"input": "a", "output": "b", "cases": []}, "not both"),
    ({"cases": []}, "cases is empty"),
    ({"cases": [{"input": "a"}]}, r"cases\[0\] must be a mapping"),
])
def test_bad_offline_calls(make_judge, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_judge().run(**kwargs)


def test_print_summary_and_results_are_opt_in(make_judge, capsys):
    judge = make_judge()
    judge.run(input="a", output="b")
    assert capsys.readouterr().out == ""
    judge.run(input="a", output="b", print_summary=True, print_results=True)
    out = capsys.readouterr().out
    assert "Pass Rate" in out and "Agent As Judge Evaluation" in out


def test_results_saved_to_file(make_judge, tmp_path):
    import json

    judge = make_judge(name="saver", file_path_to_save_results=str(tmp_path / "{name}-{run_id}.json"))
    result = judge.run(input="a", output="b")
    saved = json.loads((tmp_path / f"saver-{result.run_id}.json").read_text())
    assert saved["results"][0]["id"] == result.results[0].id
