"""Human labels: kept beside the records in every store, one per (record, reviewer); imported from
JSONL with every bad line named; `judgehooks review` driven by a scripted stdin."""

from __future__ import annotations

import json

import pytest
from _runner import CliResult, run_cli

import judgehooks
from judgehooks import AgnoDbStore, JsonlStore, MemoryStore, PostgresStore, SQLiteStore
from judgehooks._runtime import runtime


def cli(*args: str, stdin: str | None = None) -> CliResult:
    return run_cli(*args, stdin=stdin)


def graded(make_judge, store, *prompts: str, **kw):
    """Records of real verdicts (the stub judge over litellm) in `store`."""
    ev = make_judge(store=store, **kw)
    return ev.run(cases=[{"input": p, "output": f"answer to {p}"} for p in prompts]).results


@pytest.fixture(params=["sqlite", "jsonl", "memory", "postgres", "agno-sqlite", "agno-postgres"])
def any_store(request, tmp_path):
    if request.param == "agno-sqlite":
        from agno.db.sqlite import SqliteDb

        return AgnoDbStore(SqliteDb(db_file=str(tmp_path / "agno.db")))
    if request.param == "agno-postgres":
        from agno.db.postgres import PostgresDb

        dsn = request.getfixturevalue("postgres_dsn").replace("postgresql://", "postgresql+psycopg://", 1)
        return AgnoDbStore(PostgresDb(db_url=dsn))
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "evals.db")
    if request.param == "jsonl":
        return JsonlStore(tmp_path / "evals.jsonl")
    if request.param == "memory":
        return MemoryStore()
    return PostgresStore(request.getfixturevalue("postgres_dsn"))


def test_labels_are_kept_in_every_store_one_per_record_and_reviewer(make_judge, any_store):
    first, second = sorted(graded(make_judge, any_store, "q1", "q2 [[fail]]"), key=lambda r: r.input)
    judgehooks.label(first.id, passed=True, by="ann", store=any_store)
    judgehooks.label(first.id, passed=False, note="on second thought", by="ann", store=any_store)  # replaces
    judgehooks.label(first.id, score=8, by="bob", store=any_store)
    runtime.call(lambda: judgehooks.alabel(second.id, passed=False, by="ann", store=any_store))
    kept = {(lb.record_id, lb.reviewer): lb for lb in runtime.call(any_store.read_labels)}
    assert sorted(kept) == sorted([(first.id, "ann"), (first.id, "bob"), (second.id, "ann")])
    ann = kept[(first.id, "ann")]
    assert (ann.passed, ann.score, ann.note) == (False, None, "on second thought")
    assert (kept[(first.id, "bob")].passed, kept[(first.id, "bob")].score) == (None, 8)


def test_a_label_without_a_store_goes_to_the_default_store(make_judge, tmp_path, monkeypatch):
    """As docs/how-to/trust.md says: without store=, `$JUDGEHOOKS_DB` (else ./judgehooks.db)."""
    monkeypatch.setenv("JUDGEHOOKS_DB", str(tmp_path / "default.db"))
    [record] = graded(make_judge, SQLiteStore(tmp_path / "default.db"), "q1")
    judgehooks.label(record.id, passed=False, note="wrong", by="ann")
    labels = runtime.call(SQLiteStore(tmp_path / "default.db").read_labels)
    assert [(lb.record_id, lb.passed, lb.reviewer) for lb in labels] == [(record.id, False, "ann")]


def test_a_label_names_what_is_wrong_with_it(make_judge, store):
    [record] = graded(make_judge, store, "q1")
    with pytest.raises(LookupError, match="no record 'nope'"):
        judgehooks.label("nope", passed=True, by="ann", store=store)
    with pytest.raises(ValueError, match="needs passed=True/False or a score"):
        judgehooks.label(record.id, by="ann", store=store)
    with pytest.raises(ValueError, match="score must be a finite number"):
        judgehooks.label(record.id, score=float("nan"), by="ann", store=store)
    assert runtime.call(store.read_labels) == []


def test_import_stores_every_good_line_and_names_every_bad_one(make_judge, make_agent, tmp_path):
    db = tmp_path / "evals.db"
    store = SQLiteStore(db)
    first, second = sorted(graded(make_judge, store, "q1", "q2"), key=lambda r: r.input)
    [live] = graded(make_judge, store, "q3", name="other")
    # one live run graded by two evaluators: two records share its run id
    shared = make_agent(make_judge(store=store, name="judge-a"), make_judge(store=store, name="judge-b")).run("q4")
    lines = [
        json.dumps({"record_id": first.id, "passed": False, "note": "wrong year"}),
        "not json",
        json.dumps({"record_id": "missing", "passed": True}),
        json.dumps({"run_id": live.run_id, "score": 3, "by": "bob"}),
        json.dumps({"record_id": second.id}),
        json.dumps({"record_id": second.id, "passed": "yes"}),
        json.dumps({"run_id": shared.run_id, "passed": True}),  # two evaluators' records share the run
        json.dumps(["a", "list"]),
        "[" * 60_000,  # nested past Python's stack: it stopped the whole import with a RecursionError
        "",
    ]
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n")
    store.close()
    done = cli("label", "--import", str(path), "--by", "ann", "--store", str(db))
    assert done.returncode == 1
    assert "stored 2 label(s)" in done.stdout and "7 line(s) not used" in done.stdout
    errors = [line.split(": ", 3)[-1] for line in done.stderr.splitlines()]
    assert [e.split(":")[0] for e in done.stderr.splitlines()] == ["judgehooks"] * 7
    assert any("line 2: not JSON" in line for line in done.stderr.splitlines())
    assert any("line 3: no record 'missing' in the store" in line for line in done.stderr.splitlines())
    assert any("line 5: a label needs passed=True/False or a score" in line for line in done.stderr.splitlines())
    assert any("line 6: passed must be True, False or None" in line for line in done.stderr.splitlines())
    ambiguous = f"line 7: run '{shared.run_id}' has records of 2 evaluators (judge-a, judge-b): say which"
    assert any(ambiguous in line for line in done.stderr.splitlines())
    assert any("line 8: a JSON object is needed, got list" in line for line in done.stderr.splitlines())
    assert any("line 9: JSON nested deeper than Python can read" in line for line in done.stderr.splitlines())
    assert len(errors) == 7
    numbers = [int(line.split(": line ")[1].split(":")[0]) for line in done.stderr.splitlines()]
    assert numbers == [2, 3, 5, 6, 7, 8, 9]  # in file order
    kept = {(lb.record_id, lb.reviewer): lb for lb in runtime.call(SQLiteStore(db).read_labels)}
    assert sorted(kept) == sorted([(first.id, "ann"), (live.id, "bob")])
    assert (kept[(first.id, "ann")].note, kept[(live.id, "bob")].score) == ("wrong year", 3)


def test_label_command_labels_one_record(make_judge, tmp_path):
    db = tmp_path / "evals.db"
    [record] = graded(make_judge, SQLiteStore(db), "q1")
    done = cli("label", record.id, "--fail", "--note", "made up a date", "--by", "ann", "--store", str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"labelled {record.id}: fail by ann"
    missing = cli("label", "nope", "--pass", "--store", str(db))
    assert missing.returncode == 1 and "label: no record 'nope'" in missing.stderr


def test_review_is_driven_by_keys_and_shows_hostile_text_escaped(make_judge, tmp_path):
    db = tmp_path / "evals.db"
    store = SQLiteStore(db)
    ev = make_judge(store=store, scoring_strategy="numeric", threshold=7)
    records = ev.run(cases=[
        {"input": "q1 [[score=2]]", "output": "evil \x1b]0;pwned\x07 \x1b[2J answer\u202e"},
        {"input": "q2 [[score=7]]", "output": "borderline answer"},
        {"input": "q3 [[score=3]]", "output": "skipped answer"},
        {"input": "q4 [[score=10]]", "output": "fine answer"},
        {"input": "q5 [[score=1]]", "output": "never reached"},
    ]).results
    store.close()
    by_input = {r.input.split()[0]: r for r in records}
    keys = "x\np looks right to me\ns nine\ns 6 close call\nn\nq\n"
    done = cli("review", "--store", str(db), "--by", "ann", stdin=keys)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout and "\x07" not in done.stdout
    assert "evil \\u001b]0;pwned\\u0007 \\u001b[2J answer\\u202e" in done.stdout
    assert "keys: p = pass, f = fail" in done.stdout  # "x" is no key: the help, then the same record again
    assert "s needs a number" in done.stdout
    assert "labelled 2, skipped 1, of 4" in done.stdout  # failed and borderline ones; "fine answer" passed
    kept = {lb.note: lb for lb in runtime.call(SQLiteStore(db).read_labels)}
    assert len([line for line in done.stdout.splitlines() if line.startswith("[")]) == 4  # each once, then q
    passed, scored = kept["looks right to me"], kept["close call"]
    assert passed.passed is True and passed.reviewer == "ann"  # p: pass, whatever the judge said
    assert (scored.score, scored.passed) == (6, False)  # 6 is under the record's threshold 7
    assert by_input["q4"].id not in {lb.record_id for lb in kept.values()}
    again = cli("review", "--store", str(db), "--by", "ann", stdin="q\n")
    assert "2 record(s) to review" in again.stdout  # what ann labelled is not asked again


def test_review_keys_are_the_web_pages_p_f_n_and_the_older_a_d_k_still_work(make_judge, tmp_path):
    db = tmp_path / "evals.db"
    store = SQLiteStore(db)
    ev = make_judge(store=store)
    ev.run(cases=[{"input": f"q{i} [[fail]]", "output": f"answer {i}"} for i in range(6)])
    store.close()
    # p pass, f fail, n skip; then a agree (the judge failed it: fail), d disagree (pass), k skip
    done = cli("review", "--store", str(db), "--by", "ann", stdin="p\nf a note\nn\na\nd\nk\n")
    assert done.returncode == 0, done.stderr
    assert "p/f/s N/n/q> " in done.stdout and "labelled 4, skipped 2, of 6" in done.stdout
    shown = [line.rsplit("record ", 1)[1] for line in done.stdout.splitlines() if line.startswith("[")]
    kept = {lb.record_id: lb for lb in runtime.call(SQLiteStore(db).read_labels)}
    assert [kept[i].passed if i in kept else "skipped" for i in shown] == [True, False, "skipped", False, True,
                                                                          "skipped"]
    assert kept[shown[1]].note == "a note"
