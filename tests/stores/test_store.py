"""The SQLite store on disk, and what happens when a store is down."""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest
from conftest import rec
from structlog.testing import capture_logs

from judgehooks import SQLiteStore, StoreError
from judgehooks._base.record import FIELDS


@pytest.mark.anyio
async def test_schema_is_one_table_one_column_per_field_with_indexes(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    await store.write([rec(1)])
    conn = sqlite3.connect(tmp_path / "evals.db")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(eval_records)")]
    assert columns == list(FIELDS)
    indexes = {row[1]: [c[2] for c in conn.execute(f"PRAGMA index_info({row[1]})")]
               for row in conn.execute("PRAGMA index_list(eval_records)")}
    assert ["agent_id", "created_at"] in indexes.values() and ["team_id", "created_at"] in indexes.values()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.anyio
async def test_writes_are_idempotent_on_id_and_round_trip(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    await store.write([rec(1), rec(2)])
    await store.write([rec(1, status="failed"), rec(3)])
    records = await store.query(limit=None)
    assert sorted(r.id for r in records) == ["id-1", "id-2", "id-3"]
    one = next(r for r in records if r.id == "id-1")
    assert one == rec(1, created_at=one.created_at) and one.status == "passed" and one.metadata == {"k": 1}


def _store(kind: str, tmp_path, request):
    from judgehooks import JsonlStore, MemoryStore, PostgresStore

    if kind == "postgres":
        return PostgresStore(request.getfixturevalue("postgres_dsn"))
    return {"sqlite": lambda: SQLiteStore(tmp_path / "evals.db"), "jsonl": lambda: JsonlStore(tmp_path / "e.jsonl"),
            "memory": MemoryStore}[kind]()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sqlite", "postgres", "jsonl", "memory"])
async def test_every_store_answers_the_same_query_filters(kind, tmp_path, request):
    store = _store(kind, tmp_path, request)
    now = datetime.now(UTC)
    await store.write([
        rec(1, created_at=now - timedelta(hours=2)),
        rec(2, agent_id=None, team_id="t", status="failed", passed=False),
        rec(3, evaluator="other", status="error", passed=None, score=None, error_type="Timeout"),
    ])
    assert [r.id for r in await store.query(agent_id="a")] == ["id-3", "id-1"]
    assert [r.id for r in await store.query(team_id="t")] == ["id-2"]
    assert [r.id for r in await store.query(status="error")] == ["id-3"]
    assert [r.id for r in await store.query(evaluator="e", since=now - timedelta(hours=1))] == ["id-2"]
    assert [r.id for r in await store.query(until=now - timedelta(hours=1))] == ["id-1"]
    assert len(await store.query(limit=2)) == 2
    await store.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sqlite", "postgres", "jsonl", "memory"])
async def test_every_store_takes_since_and_until_as_the_command_line_writes_them(kind, tmp_path, request):
    """`query(since="24h")`, as `--since 24h` and the tutorial write it, on every store."""
    store = _store(kind, tmp_path, request)
    now = datetime.now(UTC)
    await store.write([rec(1, created_at=now - timedelta(days=3)), rec(2, created_at=now - timedelta(hours=2)),
                       rec(3, created_at=now)])
    assert [r.id for r in await store.query(since="24h")] == ["id-3", "id-2"]
    assert [r.id for r in await store.query(since="7d", until="1h")] == ["id-2", "id-1"]
    iso = (now - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert [r.id for r in await store.query(since=iso)] == ["id-3", "id-2"]
    assert [r.id async for r in store.iter_records(since="24h")] == ["id-3", "id-2"]
    await store.aclose()


@pytest.mark.parametrize(("since", "error"), [
    ("yesterday", "since: 'yesterday' is neither a duration (30m, 24h, 7d, 2w) nor an ISO time"),
    (24, "since must be a datetime or text such as '24h' or an ISO time, got int"),
])
def test_a_since_that_is_no_time_is_refused_naming_the_parameter(since, error):
    from judgehooks.stores import RecordFilter

    with pytest.raises((ValueError, TypeError), match=re.escape(error)):
        RecordFilter(since=since)


def test_a_record_filter_matches_in_python_as_its_sql_selects():
    from judgehooks.stores import RecordFilter

    now = datetime.now(UTC)
    where = RecordFilter(agent_id="a", status="failed", since=now - timedelta(hours=1), until=now)
    assert where.matches(rec(1, status="failed", passed=False, created_at=now - timedelta(minutes=1)))
    assert not where.matches(rec(2, status="failed", passed=False, created_at=now))  # until is exclusive
    assert not where.matches(rec(3, created_at=now - timedelta(minutes=1)))
    condition, args = where.sql("?", lambda ts: ts.isoformat())
    assert condition == "agent_id = ? AND status = ? AND created_at >= ? AND created_at < ?"
    assert args == ["a", "failed", (now - timedelta(hours=1)).isoformat(), now.isoformat()]
    assert RecordFilter().sql("%s", str) == ("", [])
    assert where.keywords() == {"agent_id": "a", "status": "failed", "since": now - timedelta(hours=1), "until": now}


@pytest.mark.anyio
async def test_a_base_store_subclass_gets_query_iter_records_and_no_op_extras_from_one_method():
    from judgehooks.stores import BaseStore, RecordFilter, iter_records

    class ListStore(BaseStore):
        def __init__(self) -> None:
            self.records: list = []
            self.asked: list = []

        async def write(self, records):
            self.records.extend(records)

        async def _query(self, where: RecordFilter, limit):
            self.asked.append((where, limit))
            return where.select(self.records, limit)

    store = ListStore()
    now = datetime.now(UTC)
    await store.write([rec(i, created_at=now - timedelta(seconds=i), agent_id="a" if i % 2 else "b")
                       for i in range(1, 8)])
    assert [r.id for r in await store.query(agent_id="a", limit=2)] == ["id-1", "id-3"]
    assert store.asked[-1] == (RecordFilter(agent_id="a"), 2)
    assert [r.id async for r in store.iter_records(agent_id="a", page_size=2)] == ["id-1", "id-3", "id-5", "id-7"]
    assert [r.id async for r in iter_records(store, agent_id="b", page_size=2)] == ["id-2", "id-4", "id-6"]
    assert store.stats() == {} and await store.aclose() is None
    with pytest.raises(TypeError):
        await store.query(agent="a")


def test_hook_records_land_in_a_real_sqlite_file(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    agent = make_agent(make_judge(store=store), id="agent-x")
    run_ids = [agent.run(f"q{i}").run_id for i in range(3)]
    stored = store.query_sync(agent_id="agent-x")
    assert sorted(r.run_id for r in stored) == sorted(run_ids)


def test_dead_store_on_the_hook_path_keeps_the_run_and_logs_the_record(make_judge, make_agent, tmp_path):
    (tmp_path / "not-a-file.db").mkdir()
    failed = []
    agent = make_agent(make_judge(store=SQLiteStore(tmp_path / "not-a-file.db"), on_fail=failed.append))
    with capture_logs() as logs:
        out = agent.run("q [[fail]]")
    assert out.status.value == "COMPLETED" and out.content.startswith("ECHO")
    retries = [e for e in logs if e["event"] == "store_write_retry"]
    [final] = [e for e in logs if e["event"] == "store_write_failed"]
    assert len(retries) == 4 and final["records"][0]["run_id"] == out.run_id
    assert final["records"][0]["status"] == "failed" and len(failed) == 1
    [event] = [e for e in logs if e["event"] == "evaluation"]
    assert event["stored"] is False


def test_dead_store_offline_raises_naming_the_store_and_keeps_the_results(make_judge, tmp_path):
    (tmp_path / "dir.db").mkdir()
    judge = make_judge(store=SQLiteStore(tmp_path / "dir.db"))
    with pytest.raises(StoreError, match="SQLiteStore could not write") as info:
        judge.run(cases=[{"input": "a", "output": "b"}, {"input": "c", "output": "d [[fail]]"}])
    result = info.value.result
    assert [r.status for r in result.records] == ["passed", "failed"]
    assert len(info.value.records) == 2
