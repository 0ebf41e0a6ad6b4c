"""`judgehooks export`: failures as test cases, read back by `judgehooks grade`, `run(cases=...)`
and `pydantic_evals.Dataset.from_file`."""

from __future__ import annotations

import json
import warnings

from _runner import CliResult, run_cli

from judgehooks import SQLiteStore


def cli(*args: str) -> CliResult:
    return run_cli(*args)


def failures(make_judge, db):
    store = SQLiteStore(db)
    ev = make_judge(name="helpful", store=store)
    results = ev.run(cases=[
        {"input": "q1 [[fail]]", "output": "wrong \x1b[2J answer", "metadata": {"expected_output": "right"}},
        {"input": "q2", "output": "fine"},
        {"input": "q3 [[fail]]", "output": "also wrong"},
    ]).results
    store.close()
    return {r.input: r for r in results if r.status == "failed"}, ev


def test_jsonl_cases_are_graded_again_by_grade_and_run(make_judge, server, tmp_path):
    failed, ev = failures(make_judge, tmp_path / "evals.db")
    out = tmp_path / "cases.jsonl"
    done = cli("export", "--store", str(tmp_path / "evals.db"), "--status", "failed", "--since", "1h",
               "--format", "jsonl", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote 2 failed record(s) as jsonl cases to {out}"
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    by_input = {line["input"]: line for line in lines}
    assert sorted(by_input) == ["q1 [[fail]]", "q3 [[fail]]"]
    first = by_input["q1 [[fail]]"]
    assert (first["output"], first["expected_output"]) == ("wrong \x1b[2J answer", "right")
    assert first["metadata"]["record_id"] == failed["q1 [[fail]]"].id
    assert first["metadata"]["reason"] == failed["q1 [[fail]]"].reason
    assert first["metadata"]["evaluator_version"] == ev.evaluator_version
    # read back: by the command, and by run(cases=...)
    regraded = cli("grade", str(out), "--criteria", "helpful", "--model", "openai/judge", "--api-base",
                   server.base_url, "--api-key", "k", "--store", str(tmp_path / "again.db"), "--json")
    assert regraded.returncode == 0, regraded.stderr
    summary = json.loads(regraded.stdout)
    assert (summary["failed"], summary["passed"]) == (2, 0)
    again = make_judge(store=SQLiteStore(tmp_path / "again2.db")).run(cases=lines)
    assert sorted(r.status for r in again.results) == ["failed", "failed"]
    assert {r.metadata["record_id"] for r in again.results} == {r.id for r in failed.values()}


def test_the_pydantic_evals_dataset_loads_with_from_file(make_judge, tmp_path):
    from pydantic_evals import Dataset

    failed, _ = failures(make_judge, tmp_path / "evals.db")
    out = tmp_path / "failures.json"
    done = cli("export", "--store", str(tmp_path / "evals.db"), "--format", "pydantic-evals", "-o", str(out))
    assert done.returncode == 0, done.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # untyped Dataset: Any for inputs, output and metadata
        dataset = Dataset.from_file(out)
    cases = {case.name: case for case in dataset.cases}
    assert sorted(cases) == sorted(r.id for r in failed.values())
    first = cases[failed["q1 [[fail]]"].id]
    assert (first.inputs, first.expected_output) == ("q1 [[fail]]", "right")
    assert first.metadata["output"] == "wrong \x1b[2J answer" and first.metadata["status"] == "failed"


def test_export_to_stdout_is_json_with_every_control_escaped(make_judge, tmp_path):
    failures(make_judge, tmp_path / "evals.db")
    done = cli("export", "--store", str(tmp_path / "evals.db"))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and len(done.stdout.splitlines()) == 2
    assert all(json.loads(line)["metadata"]["status"] == "failed" for line in done.stdout.splitlines())
