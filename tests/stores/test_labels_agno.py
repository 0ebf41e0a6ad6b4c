"""Human labels in an agno db (SqliteDb, PostgresDb): kept as eval runs of their own, one per
record and reviewer, and read back with the records by `calibrate`, `review` and `report`."""

from __future__ import annotations

import json

import pytest
from _runner import CliResult, run_cli

import judgehooks
from judgehooks import AgnoDbStore, EvalRecord
from judgehooks._runtime import runtime
from judgehooks.stores._agnorows import LABEL_MODEL


def cli(*args: str, stdin: str | None = None) -> CliResult:
    return run_cli(*args, stdin=stdin)


def agno_db(kind: str, tmp_path, request):
    if kind == "SqliteDb":
        from agno.db.sqlite import SqliteDb

        return SqliteDb(db_file=str(tmp_path / "agno.db"))
    from agno.db.postgres import PostgresDb

    return PostgresDb(db_url=request.getfixturevalue("postgres_dsn").replace("postgresql://", "postgresql+psycopg://"))


def live_records(make_judge, make_agent, store, db, *prompts: str) -> list[EvalRecord]:
    """Verdicts of live agent runs (the stub judge over litellm), written to `store` and to agno's `db`."""
    agent = make_agent(make_judge(db=db, name="facts", scoring_strategy="numeric", threshold=7), id="agent-1")
    for prompt in prompts:
        agent.run(prompt)
    return sorted(store.records, key=lambda r: r.input)


def label_rows(db) -> list[str]:
    return sorted(run.run_id for run in db.get_eval_runs(model_id=LABEL_MODEL))


@pytest.mark.parametrize("kind", ["SqliteDb", "PostgresDb"])
def test_live_records_read_back_and_a_label_is_one_row_per_record_and_reviewer(kind, make_judge, make_agent, store,
                                                                               tmp_path, request):
    # (tests/alerts/test_labels.py runs the label sequence every store shares on agno dbs too)
    db = agno_db(kind, tmp_path, request)
    first, second = live_records(make_judge, make_agent, store, db, "q1 [[score=9]]", "q2 [[score=3]]")
    agno = AgnoDbStore(db)
    # the records read back whole from agno's eval table, each as our own store has it
    assert sorted(runtime.call(lambda: agno.query(limit=None)), key=lambda r: r.input) == [first, second]
    assert runtime.call(lambda: agno.query(status="failed", agent_id="agent-1")) == [second]
    judgehooks.label(first.id, passed=True, by="ann", store=agno)
    ann = judgehooks.label(first.id, passed=False, note="on second thought", by="ann", store=agno)
    rows = label_rows(db)
    assert len(rows) == 1  # the replaced label's row is gone
    runtime.call(lambda: agno.write_labels([ann, ann]))  # the same label again, twice in a batch: idempotent
    assert label_rows(db) == rows and runtime.call(agno.read_labels) == [ann]
    # labels are not records, and agno's per-agent list of eval runs shows only the verdicts
    assert len(runtime.call(lambda: agno.query(limit=None))) == 2
    assert sorted(run.run_id for run in db.get_eval_runs(agent_id="agent-1")) == sorted([first.id, second.id])


@pytest.mark.parametrize("kind", ["SqliteDb", "PostgresDb"])
def test_calibrate_reads_the_records_and_labels_of_an_agno_db(kind, make_judge, make_agent, store, tmp_path, request):
    db = agno_db(kind, tmp_path, request)
    records = live_records(make_judge, make_agent, store, db, "a [[score=9]]", "b [[score=8]]", "c [[score=2]]",
                           "d [[score=3]]")
    agno = AgnoDbStore(db)
    people = {"a": True, "b": False, "c": False, "d": True}  # agrees on a and c
    for record in records:
        judgehooks.label(record.id, passed=people[record.input[0]], by="ann", store=agno)
    result = judgehooks.calibrate("facts", store=agno, resamples=50)
    assert (result.n, result.accuracy, result.raw_pass_rate) == (4, 0.5, 0.5)
    assert (result.confusion.tp, result.confusion.fp, result.confusion.fn, result.confusion.tn) == (1, 1, 1, 1)


def test_the_commands_read_and_label_an_agno_db_by_url(make_judge, make_agent, store, tmp_path):
    from agno.db.sqlite import SqliteDb

    path = tmp_path / "agno.db"
    low, high = live_records(make_judge, make_agent, store, SqliteDb(db_file=str(path)), "q1 [[score=2]]",
                             "q2 [[score=9]]")
    url = f"agno+sqlite:///{path}"
    done = cli("label", high.id, "--fail", "--note", "too generous", "--by", "bob", "--store", url)
    assert done.returncode == 0, done.stderr
    done = cli("review", "--store", url, "--by", "ann", stdin="a\n")  # the queue: the failed record
    assert done.returncode == 0, done.stderr
    assert "labelled 1, skipped 0, of 1" in done.stdout
    done = cli("calibrate", "--store", url, "--evaluator", "facts", "--json")
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["n"], json.loads(done.stdout)["accuracy"]) == (2, 0.5)
    done = cli("report", "--store", url, "--since", "all", "--json")
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)["groups"]
    assert (row["evaluator"], row["passed"], row["failed"]) == ("facts", 1, 1)
    missing = cli("report", "--store", f"agno+sqlite:///{tmp_path / 'typo.db'}")
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_rows_that_do_not_read_back_are_skipped_not_believed(make_judge, make_agent, store, tmp_path):
    from agno.db.schemas.evals import EvalRunRecord, EvalType
    from agno.db.sqlite import SqliteDb

    db = SqliteDb(db_file=str(tmp_path / "agno.db"))
    [record] = live_records(make_judge, make_agent, store, db, "q1 [[score=9]]")
    agno = AgnoDbStore(db)
    judgehooks.label(record.id, passed=True, by="ann", store=agno)
    forged = {"judgehooks": {"record": {**record.model_dump(mode="json"), "id": "someone-else", "status": "failed"}}}
    broken = {"judgehooks": {"record": {"id": "r-2", "status": "maybe"}}}
    fake_label = {"judgehooks": {"label": {"record_id": record.id, "reviewer": "mallory", "passed": False}}}
    for run_id, data, model in (("r-1", forged, None), ("r-2", broken, None), ("label-x", fake_label, LABEL_MODEL),
                                ("agno-own", {"results": [], "pass_rate": 100.0}, None)):
        db.create_eval_run(EvalRunRecord(run_id=run_id, eval_type=EvalType.AGENT_AS_JUDGE, eval_data=data,
                                         model_id=model))
    assert runtime.call(lambda: agno.query(limit=None)) == [record]
    assert [(lb.record_id, lb.reviewer) for lb in runtime.call(agno.read_labels)] == [(record.id, "ann")]
    assert runtime.call(lambda: agno.records_by_id(["r-1", "r-2", record.id])) == [record]


def test_agno_store_urls_name_the_agno_db_they_open():
    from agno.db.postgres import PostgresDb
    from agno.db.sqlite import SqliteDb

    from judgehooks.stores import store_from_url

    postgres = store_from_url("agno+postgresql://judge@127.0.0.1:5432/evals")
    assert isinstance(postgres, AgnoDbStore) and isinstance(postgres.db, PostgresDb)
    assert postgres.db.db_url == "postgresql+psycopg://judge@127.0.0.1:5432/evals"
    sqlite = store_from_url("agno+sqlite:///agno.db")
    assert isinstance(sqlite.db, SqliteDb) and sqlite.path == "agno.db"
    with pytest.raises(ValueError, match="an agno db URL is sqlite:///path.db or postgresql://"):
        store_from_url("agno+mysql://host/db")
