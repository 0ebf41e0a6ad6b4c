"""What the commands print and write, against hostile record text and secret-bearing URLs (issue 26,
L6-L9): export escapes every terminal-steering character on stdout and keeps files exact and
private, review's reason cannot forge the screen's own lines, and no store password is printed."""

from __future__ import annotations

import json
import os
import stat
from urllib.parse import quote

import pytest
from _runner import run_cli

from judgehooks import SQLiteStore

# C1 CSI, DEL, a bidi override and isolate, ESC: what JSON's own escaping leaves raw (but ESC).
STEERING = "\x9b2J \x7f \u202egnp.exe\u2066 \x1b]0;pwned\x07"


@pytest.fixture
def hostile(make_judge, tmp_path):
    """A SQLite store with one failed record whose output and reason steer terminals."""
    db = tmp_path / "evals.db"
    store = SQLiteStore(db)
    forged = "fine\n[2/2] facts  2026-01-01T00:00:00Z  record x\njudge: PASSED\ninput:\r  | ok " + STEERING
    [record] = make_judge(name="facts", store=store).run(
        input=f"q [[fail]] [[reason={quote(forged, safe='')}]]", output=f"answer {STEERING}").records
    store.close()
    assert record.status == "failed" and record.reason == forged
    return db, record


def test_export_to_stdout_escapes_c1_controls_del_and_bidi_overrides(hostile):
    db, record = hostile
    done = run_cli("export", "--store", str(db))
    assert done.returncode == 0, done.stderr
    assert not any(ch in done.stdout for ch in "\x9b\x7f\u202e\u2066\x1b\x07")
    [line] = done.stdout.splitlines()
    case = json.loads(line)  # the escapes are JSON's: the same text comes back
    assert case["output"] == record.output and case["metadata"]["reason"] == record.reason


@pytest.mark.parametrize("form", ["jsonl", "pydantic-evals"])
def test_export_to_a_file_is_exact_json_readable_only_by_its_owner(hostile, tmp_path, form):
    db, record = hostile
    out = tmp_path / "cases.out"
    done = run_cli("export", "--store", str(db), "--format", form, "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    text = out.read_text(encoding="utf-8")
    assert "\u202e" in text and "\x9b" in text  # a file is data: the characters as stored
    if form == "jsonl":
        assert json.loads(text.splitlines()[0])["output"] == record.output
    else:
        assert json.loads(text)["cases"][0]["metadata"]["output"] == record.output


def test_review_shows_the_reason_indented_so_it_cannot_forge_the_screens_lines(hostile):
    db, _ = hostile
    done = run_cli("review", "--store", str(db), "--by", "ann", stdin="n\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("[")] == [next(x for x in lines if x.startswith("[1/1]"))]
    assert [line for line in lines if line.startswith("judge:")] == ["judge: FAILED"]
    assert [line for line in lines if line.startswith("input:")] == ["input:"]
    reason = lines[lines.index("reason:") + 1: lines.index("input:")]
    assert len(reason) == 5 and all(line.startswith("  | ") for line in reason)
    assert not any(ch in done.stdout for ch in "\x9b\x7f\u202e\u2066\x1b\x07\r")


SECRET = "hunter2-s3cret"


@pytest.mark.parametrize("url", [
    f"postgresql://judge@127.0.0.1:9/evals?password={SECRET}",
    f"postgresql://judge@127.0.0.1:9/evals?sslmode=disable&password={SECRET}",
    f"postgresql://judge:{SECRET}@127.0.0.1:9/evals",
])
@pytest.mark.parametrize("command", [("report",), ("tail", "--no-follow"), ("export",), ("review",),
                                     ("resume", "--timeout", "1")])
def test_a_postgres_password_is_never_printed(url, command):
    pytest.importorskip("psycopg")
    done = run_cli(*command, "--store", url)
    assert done.returncode == 1, done.stdout + done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "cannot open store postgresql://judge" in done.stderr and "***" in done.stderr


def test_a_password_in_judgehooks_db_is_never_printed():
    pytest.importorskip("psycopg")
    done = run_cli("report", env={"JUDGEHOOKS_DB": f"postgresql://judge@127.0.0.1:9/evals?password={SECRET}"})
    assert done.returncode == 1 and SECRET not in done.stdout + done.stderr
    assert "password=***" in done.stderr
