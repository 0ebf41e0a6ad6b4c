"""`judgehooks.feedback`: an end user's thumb or number on a run, kept with source="user" on real
SQLite, JSONL and PostgreSQL stores (and the memory store), apart from the reviewers' labels."""

from __future__ import annotations

import functools
import math

import pytest
from conftest import rec
from structlog.testing import capture_logs

import judgehooks
from judgehooks import JsonlStore, MemoryStore, PostgresStore, SQLiteStore, calibrate, feedback, label
from judgehooks._runtime import runtime


@pytest.fixture(params=["sqlite", "jsonl", "postgres", "memory"])
def store(request, tmp_path):
    if request.param == "postgres":
        made = PostgresStore(request.getfixturevalue("postgres_dsn"))
    else:
        made = {"sqlite": lambda: SQLiteStore(tmp_path / "evals.db"),
                "jsonl": lambda: JsonlStore(tmp_path / "evals.jsonl"), "memory": MemoryStore}[request.param]()
    yield made
    runtime.call(made.aclose)


def read(store, run_ids=None):
    return runtime.call(store.read_feedback, run_ids)


def test_feedback_is_kept_beside_the_run_with_source_user(store):
    runtime.call(store.write, [rec(1), rec(2)])
    given = feedback("run-1", "up", comment="spot on", user_id="u-7", store=store)
    feedback("run-2", 4.5, store=store)
    kept = read(store, ["run-1"])
    assert [(f.run_id, f.value, f.comment, f.user_id, f.source, f.passed, f.score) for f in kept] == [
        ("run-1", "up", "spot on", "u-7", "user", True, None)]
    assert kept[0].id == given.id
    assert [(f.run_id, f.value, f.passed, f.score) for f in read(store)] == [
        ("run-1", "up", True, None), ("run-2", 4.5, None, 4.5)]


def test_a_named_user_changing_their_mind_replaces_their_feedback_and_anonymous_feedback_accumulates(store):
    feedback("run-1", "up", user_id="u-7", store=store)
    feedback("run-1", "down", comment="on second thought", user_id="u-7", store=store)
    feedback("run-1", "up", store=store)
    feedback("run-1", "up", store=store)
    kept = read(store, ["run-1"])
    assert sorted((f.user_id or "", f.value) for f in kept) == [("", "up"), ("", "up"), ("u-7", "down")]


def test_feedback_on_a_run_the_store_has_no_record_of_is_kept(store):
    # feedback may come before the background verdict is stored, or for a run no evaluator sampled
    assert runtime.call(store.records_by_id, ["id-9"]) == []
    feedback("run-not-graded-yet", "down", store=store)
    assert [f.value for f in read(store, ["run-not-graded-yet"])] == ["down"]


@pytest.mark.parametrize(("value", "says"), [
    ("sideways", "'up', 'down' or a finite number"), (math.nan, "finite"), (math.inf, "finite"),
    (-math.inf, "finite"), (True, "a bool"), (None, "'up', 'down' or a finite number"), ("UP", "the text 'UP'"),
    (10 ** 400, "finite"), ([1], "list")])
def test_a_bad_value_is_refused_naming_it_and_nothing_is_kept(store, value, says):
    with pytest.raises(ValueError, match="value") as raised:
        feedback("run-1", value, store=store)
    assert says in str(raised.value)
    assert read(store) == []


@pytest.mark.parametrize(("keywords", "says"), [
    ({"run_id": ""}, "run_id must be a non-empty string"), ({"run_id": "r" * 201}, "run_id is longer than 200"),
    ({"comment": "c" * 2001}, "comment is longer than 2000"), ({"user_id": 7}, "user_id must be"),
    ({"comment": "a\x00b"}, "comment holds a NUL"), ({"user_id": "u\ud800"}, "user_id is not Unicode text")])
def test_a_bad_run_id_comment_or_user_is_refused_naming_it(store, keywords, says):
    with pytest.raises(ValueError, match=says):
        feedback(**{"run_id": "run-1", "value": "up", **keywords}, store=store)
    assert read(store) == []


def test_hostile_text_is_kept_as_text(store):
    hostile = "<script>alert(1)</script>'); DROP TABLE eval_records; --\u202e\ud7ff"
    feedback("run-1", "down", comment=hostile, user_id=hostile[:200], store=store)
    (kept,) = read(store)
    assert kept.comment == hostile and kept.user_id == hostile[:200]


def test_user_feedback_is_not_a_reviewers_label_and_calibration_does_not_count_it(store):
    runtime.call(store.write, [rec(i, evaluator="helpful", evaluator_version="v1") for i in range(3)])
    for i in range(3):
        feedback(f"run-{i}", "down", user_id="u-1", store=store)
    assert runtime.call(store.read_labels) == []
    assert calibrate("helpful", store=store).n == 0
    label("id-0", passed=False, by="ana", store=store)
    assert calibrate("helpful", store=store).n == 1


def test_feedback_outlives_the_store_object(tmp_path):
    for make in (lambda: SQLiteStore(tmp_path / "evals.db"), lambda: JsonlStore(tmp_path / "evals.jsonl")):
        first = make()
        feedback("run-1", 2, comment="meh", user_id="u", store=first)
        runtime.call(first.aclose)
        again = make()
        assert [(f.value, f.comment) for f in read(again)] == [(2.0, "meh")]
        runtime.call(again.aclose)


def test_without_a_store_feedback_goes_to_the_store_the_hooks_use(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGEHOOKS_DB", str(tmp_path / "hooks.db"))
    feedback("run-1", "up", user_id="u-1")
    store = SQLiteStore(tmp_path / "hooks.db")
    assert [(f.run_id, f.value) for f in read(store)] == [("run-1", "up")]
    store.close()


def test_afeedback_is_the_same_for_async_callers(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    kept = runtime.call(functools.partial(judgehooks.afeedback, "run-1", "up", store=store))
    assert read(store) == [kept]
    store.close()


def test_a_torn_or_forged_line_in_the_feedback_file_is_skipped_with_a_warning(tmp_path):
    store = JsonlStore(tmp_path / "evals.jsonl")
    feedback("run-1", "up", store=store)
    with open(store.feedback_path, "a", encoding="utf-8") as fh:
        fh.write('{"run_id": "run-1", "value": "sideways"}\n' + "[" * 100_000 + '\n{"run_id": "run-1", "val')
    with capture_logs() as logs:
        kept = read(store)
    assert [f.value for f in kept] == ["up"]  # a line nested past Python's stack hid every feedback
    assert [e["line"] for e in logs if e["event"] == "feedback_line_skipped"] == [2, 3, 4]


def test_an_agno_database_store_keeps_no_feedback_and_says_which_stores_do(tmp_path):
    from agno.db.sqlite import SqliteDb

    from judgehooks import AgnoDbStore

    store = AgnoDbStore(SqliteDb(db_file=str(tmp_path / "agno.db")))
    with pytest.raises(NotImplementedError, match="does not keep user feedback: keep it in a SQLite, PostgreSQL"):
        feedback("run-1", "up", store=store)
