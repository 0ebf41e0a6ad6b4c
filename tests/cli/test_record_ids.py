"""Record ids where users look for them: `report`'s worst failures and `tail` show the id that
`judgehooks label RECORD_ID` takes, and each offline case can be labelled on its own."""

from __future__ import annotations

import json

import pytest
from _runner import run_cli

from judgehooks import SQLiteStore


@pytest.fixture
def failed(make_judge, tmp_path):
    """An offline batch of three identical failing cases, in a SQLite store."""
    db = tmp_path / "evals.db"
    store = SQLiteStore(db)
    records = make_judge(name="facts", store=store).run(cases=[{"input": "q [[fail]]", "output": "a"}] * 3).records
    store.close()
    return db, records


def test_report_worst_failures_show_the_record_id_that_label_takes(failed):
    db, records = failed
    done = run_cli("report", "--store", str(db), "--since", "all", "--worst", "3")
    assert done.returncode == 0, done.stderr
    shown = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("    record ")]
    assert sorted(shown) == sorted(r.id for r in records)
    labelled = run_cli("label", shown[0], "--fail", "--by", "ann", "--store", str(db))
    assert labelled.returncode == 0, labelled.stderr


def test_tail_shows_each_record_id(failed):
    db, records = failed
    done = run_cli("tail", "--store", str(db), "--no-follow")
    assert done.returncode == 0, done.stderr
    ids = [word.removeprefix("id=") for line in done.stdout.splitlines() for word in line.split()
           if word.startswith("id=")]
    assert sorted(ids) == sorted(r.id for r in records)


def test_an_offline_case_is_labelled_by_its_own_run_id(failed, tmp_path):
    db, records = failed
    lines = tmp_path / "labels.jsonl"
    lines.write_text(json.dumps({"run_id": records[1].run_id, "passed": True}) + "\n")
    done = run_cli("label", "--import", str(lines), "--by", "ann", "--store", str(db), "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    stored = json.loads(done.stdout)["stored"]
    assert [lb["record_id"] for lb in stored] == [records[1].id]


def test_report_says_how_many_jobs_wait_in_the_outbox_and_how_to_resume_them(failed):
    from judgehooks._grading.outbox import Job, Outbox

    db, _ = failed
    outbox = Outbox(str(db.with_name("evals.outbox.db")))  # where a SQLite store's background jobs wait
    for i in range(3):
        outbox.put(Job(id=f"job-{i}", evaluator="facts", context={"input": "q", "output": "a", "run_id": f"r{i}"}))
    outbox.close()
    done = run_cli("report", "--store", str(db), "--since", "all")
    assert done.returncode == 0, done.stderr
    assert (f"pending: 3 background job(s) wait in the outbox {db.with_name('evals.outbox.db')} (facts 3); "
            "unless a running process is grading them, one that crashed or timed out at exit left them: grade "
            f"them with `judgehooks resume --store {db}`") in done.stdout
    as_json = json.loads(run_cli("report", "--store", str(db), "--json").stdout)
    assert as_json["pending_jobs"]["count"] == 3 and as_json["pending_jobs"]["by_evaluator"] == {"facts": 3}
