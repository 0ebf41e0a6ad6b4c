"""A store that goes away comes back whole: records wait in the spill file and are re-delivered."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import anyio
import pytest
from _servers import create_database
from conftest import rec, wait_for
from structlog.testing import capture_logs

import judgehooks
from judgehooks import MemoryStore, PostgresStore
from judgehooks.stores._spill import SpillFile, SpillingStore, store_key


class SwitchableStore(MemoryStore):
    """A MemoryStore that can be switched off, and remembers the order records arrived in."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.arrived: list[str] = []

    async def write(self, records):
        if self.down:
            raise ConnectionError("store is down")
        self.arrived += [r.id for r in records]
        await super().write(records)


def test_records_wait_while_down_and_arrive_in_order_when_back(tmp_path):
    inner = SwitchableStore()
    spilling = SpillingStore(inner, tmp_path / "outbox.db", batch_size=3, retry_interval=0.01, max_interval=0.05)

    async def write(i: int) -> None:
        await spilling.write([rec(i)])

    judgehooks_loop = judgehooks._runtime.runtime.call
    judgehooks_loop(write, 0)
    inner.down = True
    with capture_logs() as logs:
        for i in range(1, 8):
            judgehooks_loop(write, i)
        assert spilling.stats()["spill_pending"] == 7 and inner.arrived == ["id-0"]
        inner.down = False
        assert spilling.wait(30)
    assert inner.arrived == [f"id-{i}" for i in range(8)]  # nothing overtook the waiting records
    assert spilling.stats() == {"spilled": 7, "redelivered": 7, "spill_pending": 0, "dead_letters": 0}
    assert [e["record_ids"] for e in logs if e["event"] == "store_unavailable_spilling"] == [["id-1"]]
    assert sum(e["records"] for e in logs if e["event"] == "spill_redelivered") == 7
    judgehooks_loop(spilling.aclose)


class BlippingStore(SwitchableStore):
    """A SwitchableStore whose next writes fail or not as `blips` says, as a pool's stale connections do."""

    def __init__(self) -> None:
        super().__init__()
        self.blips: list[bool] = []

    async def write(self, records):
        if self.blips and self.blips.pop(0):
            raise ConnectionError("server closed the connection unexpectedly")
        await super().write(records)


def test_records_redelivered_one_at_a_time_are_logged_as_redelivered(tmp_path):
    inner = BlippingStore()
    spilling = SpillingStore(inner, tmp_path / "outbox.db", batch_size=3, retry_interval=0.01, max_interval=0.05)
    judgehooks_loop = judgehooks._runtime.runtime.call
    inner.down = True
    with capture_logs() as logs:
        for i in range(3):
            judgehooks_loop(spilling.write, [rec(i)])
        assert spilling.stats()["spill_pending"] == 3
        # Back up, the batch of three hits a stale connection, then one at a time: id-0 goes in,
        # id-1 hits another, id-2 goes in; id-1 follows in the next batch.
        inner.blips = [True, False, True]
        inner.down = False
        assert spilling.wait(30)
    assert inner.arrived == ["id-0", "id-2", "id-1"]
    assert spilling.stats()["redelivered"] == 3
    events = [e for e in logs if e["event"] == "spill_redelivered"]
    assert [(e["records"], e.get("one_at_a_time", False)) for e in events] == [(2, True), (1, False)]
    judgehooks_loop(spilling.aclose)


@pytest.mark.slow
@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_postgres_stopped_and_restarted_mid_run_loses_no_record(background, private_postgres, make_judge,
                                                                make_agent, tmp_path):
    dsn = create_database(private_postgres.dsn, "evals")
    store = PostgresStore(dsn, timeout=1, connect_timeout=1)
    outbox = tmp_path / "outbox.db"
    judge = make_judge(store=store, run_in_background=background, outbox=str(outbox))
    agent = make_agent(judge, id="spill-agent")
    run_ids = [agent.run(f"before {i}").run_id for i in range(4)]
    assert judgehooks.drain(30)
    private_postgres.stop()  # by PID, mid-run
    with capture_logs() as logs:
        run_ids += [agent.run(f"during {i}").run_id for i in range(6)]
        spill = SpillFile(outbox)
        wait_for(lambda: spill.count(store_key(store)) == 6, timeout=60)  # all six wait on disk
        private_postgres.start()
        run_ids += [agent.run(f"after {i}").run_id for i in range(4)]
        assert judgehooks.drain(60)
    stored = anyio.run(lambda: store.query(agent_id="spill-agent", limit=None))
    anyio.run(store.aclose)
    assert sorted(r.run_id for r in stored) == sorted(run_ids)  # 14 runs, 14 records, none twice
    assert spill.count(store_key(store)) == 0
    assert any(e["event"] == "store_unavailable_spilling" for e in logs)
    assert sum(e["records"] for e in logs if e["event"] == "spill_redelivered") >= 6
    if background:
        stats = judgehooks.stats()[judge.evaluator]
        assert stats["spilled"] >= 6 and stats["redelivered"] == stats["spilled"] and stats["spill_pending"] == 0


@pytest.mark.slow
def test_spilled_records_outlive_the_process_and_the_next_one_delivers_them(private_postgres, tmp_path):
    dsn = create_database(private_postgres.dsn, "evals")
    private_postgres.stop()
    outbox = tmp_path / "outbox.db"
    writer = """
import sys, anyio, judgehooks
from judgehooks import EvalRecord, PostgresStore
from judgehooks.stores._spill import SpillingStore
spilling = SpillingStore(PostgresStore(sys.argv[1], timeout=1, connect_timeout=1), sys.argv[2])
records = [EvalRecord(id=f"id-{i}", status="passed", evaluator="e", mode="binary", passed=True) for i in range(5)]
judgehooks._runtime.runtime.call(spilling.write, records)
print(spilling.stats()["spill_pending"])
"""
    out = subprocess.run([sys.executable, "-c", writer, dsn, str(outbox)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["5"]  # the process exited with its records still waiting
    private_postgres.start()
    reader = """
import sys, anyio, judgehooks
from judgehooks import PostgresStore
from judgehooks.stores._spill import SpillingStore
store = PostgresStore(sys.argv[1])
SpillingStore(store, sys.argv[2])  # finds the rows an earlier process left
assert judgehooks.drain(60)
print(" ".join(sorted(r.id for r in anyio.run(lambda: store.query(limit=None)))))
"""
    out = subprocess.run([sys.executable, "-c", reader, dsn, str(outbox)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [f"id-{i}" for i in range(5)]


def test_spill_is_on_for_remote_stores_and_off_for_local_files(make_judge, tmp_path):
    from judgehooks import SQLiteStore

    assert isinstance(make_judge(store=PostgresStore("postgresql://127.0.0.1/x"))._pipeline.store, SpillingStore)
    assert not isinstance(make_judge(store=SQLiteStore(tmp_path / "e.db"))._pipeline.store, SpillingStore)
    assert not isinstance(make_judge(store=PostgresStore("postgresql://127.0.0.1/x"), spill=False)._pipeline.store,
                          SpillingStore)
    with pytest.raises(TypeError, match="spill must be a path, True"):
        make_judge(spill=3)


def test_judgehooks_resume_re_delivers_what_a_process_left_in_the_spill(tmp_path, capsys):
    from judgehooks import SQLiteStore
    from judgehooks._cli import main

    db, outbox = str(tmp_path / "evals.db"), str(tmp_path / "evals.outbox.db")
    SpillFile(outbox).append(store_key(SQLiteStore(db)), [rec(1), rec(2)])  # as a process would have left it
    assert main(["resume", "--store", db]) == 0
    assert "re-delivered 2 spilled record(s), 0 still waiting" in capsys.readouterr().out
    assert sorted(r.id for r in SQLiteStore(db).query_sync()) == ["id-1", "id-2"]


def test_a_column_another_connection_added_meanwhile_is_a_finished_migration(tmp_path):
    """Two connections opening an older file at once both see a column missing; the second ALTER
    fails with "duplicate column name", which means the migration is done (a full-suite run once
    failed a spill test on exactly this race), while any other error still raises."""
    import sqlite3

    from judgehooks._base.sqlitefile import add_column

    path = tmp_path / "old.db"
    first, second = sqlite3.connect(path), sqlite3.connect(path)
    first.execute("CREATE TABLE eval_spill (id TEXT)")
    first.commit()
    add_column(first, "eval_spill", "tries", "INTEGER NOT NULL DEFAULT 0")
    first.commit()
    add_column(second, "eval_spill", "tries", "INTEGER NOT NULL DEFAULT 0")
    assert [row[1] for row in second.execute("PRAGMA table_info(eval_spill)")] == ["id", "tries"]
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        add_column(second, "missing", "tries", "INTEGER")


@pytest.mark.parametrize("bad", ["not json", '{"id": "x"}', b"\xff\xfe{"])
def test_a_spilled_row_that_does_not_read_back_is_a_dead_letter_and_the_rows_behind_it_flow_on(bad, tmp_path):
    store = MemoryStore()
    spill_path = tmp_path / "outbox.db"
    SpillFile(spill_path).append(store_key(store), [rec(1)])  # the table, and one good row
    conn = sqlite3.connect(spill_path)
    # before it, as another program (or a torn disk) may leave it
    conn.execute("INSERT INTO eval_spill (seq, store, id, record, spilled_at) "
                 "VALUES (0, ?, 'id-0', CAST(? AS TEXT), 0)", (store_key(store), bad))
    conn.commit()
    conn.close()
    spilling = SpillingStore(store, spill_path, retry_interval=0.01, max_interval=0.05)
    call = judgehooks._runtime.runtime.call
    call(spilling.write, [rec(2)])
    assert spilling.wait(10)
    by_id = {r.id: r for r in call(store.query)}
    assert sorted(by_id) == ["id-0", "id-1", "id-2"]  # the unreadable one has its error record in the store
    assert (by_id["id-0"].status, by_id["id-0"].error_type) == ("error", "StoreError")
    assert spilling.stats()["dead_letters"] == 1 and spilling.stats()["spill_pending"] == 0
    [(record_id, record, error)] = sqlite3.connect(spill_path).execute(
        "SELECT id, CAST(record AS BLOB), error FROM eval_dead_letters").fetchall()
    assert record_id == "id-0" and "does not read back" in error
    assert record == (bad if isinstance(bad, bytes) else bad.encode())  # kept whole
    call(spilling.aclose)
