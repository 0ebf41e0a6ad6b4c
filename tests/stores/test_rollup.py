"""The hourly rollup the UI's counting pages read (`stores._rollup`): on SQLite and PostgreSQL its
answers are the one pass over the records, for ranges cut mid-hour, for records written after a page
read it (late ones too), for a store written before it existed, and for two PostgreSQL writers
writing one run's records at once."""

from __future__ import annotations

import functools
import sqlite3
import threading
from datetime import UTC, datetime, timedelta

import pytest

from judgehooks import EvalRecord, MemoryStore, PostgresStore, RecordFilter, SQLiteStore
from judgehooks._base.record import FIELDS
from judgehooks._runtime import runtime
from judgehooks.stores import _rollup
from judgehooks.stores._browse import Browse, tallies, verdict_counts
from judgehooks.stores._compare import counts
from judgehooks.stores._rollup import Split, split
from judgehooks.stores._segments import segments
from judgehooks.stores._series import pass_rates, run_series

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def records(start: int, stop: int, *, late: bool = False) -> list[EvalRecord]:
    """Records `start`..`stop`: every 7 minutes over two days, two evaluators (a version change on
    one), two agents, a run per three records (so runs span hours; a run's agent and own figures the
    same on each of its records, as the hooks write them), some without a run, some re-judged, every
    status; `late` puts them back in time, among the old ones."""
    found = []
    for i in range(start, stop):
        at = NOW - timedelta(days=2) + timedelta(minutes=7 * i, seconds=i % 60, microseconds=i)
        if late:
            at -= timedelta(hours=30)
        status = ("passed", "failed", "passed", "error", "skipped")[i % 5]
        found.append(EvalRecord(
            id=f"r-{i}{'-late' if late else ''}", created_at=at, status=status,
            evaluator=("helpful", "polite")[i % 2],
            evaluator_version=None if i % 11 == 0 else "v1" if i < 250 else "v2",
            mode="numeric", threshold=7, score=None if status in ("error", "skipped") else i % 10,
            passed=None if status in ("error", "skipped") else status == "passed",
            agent_id=None if i // 3 % 13 == 0 else ("support", "sales")[i // 3 % 2],
            team_id="desk" if i // 3 % 13 == 0 else None,
            run_id=None if i % 17 == 0 else f"run-{i // 3}", latency_ms=None if i % 9 == 0 else 100.0 + i % 50,
            cost_usd=None if i % 8 == 0 else 0.001 * (i % 4),
            run_latency_ms=None if i // 3 % 6 == 0 else 900.0 + i // 3,
            run_cost_usd=0.01 * (i // 3 % 5) if i // 3 % 10 else None,
            rejudge_of=f"r-{i - 1}" if i % 19 == 0 else None,
            metadata={"plan": ("free", "pro", "team")[i // 3 % 3], "tier": i % 4, "beta": i % 3 == 0,
                      "ratio": (0.5, 2.25)[i % 2], "request": f"q-{i}"} if i % 23 else {"tier": "4"}))
    return found


META = ("plan", "tier", "beta", "ratio")
BROWSES = [
    Browse(),
    Browse(RecordFilter(since=NOW - timedelta(hours=30, minutes=17))),
    Browse(RecordFilter(evaluator="helpful", since=NOW - timedelta(hours=40, minutes=3),
                        until=NOW - timedelta(hours=2, minutes=41))),
    Browse(RecordFilter(agent_id="support", until=NOW - timedelta(hours=20, minutes=30))),
    Browse(RecordFilter(team_id="desk")),
    Browse(RecordFilter(since=NOW - timedelta(hours=10, minutes=20), until=NOW - timedelta(hours=10, minutes=5))),
    Browse(RecordFilter(evaluator="polite"), version="v2"),
    Browse(RecordFilter(since=NOW - timedelta(hours=12))),  # on the hour: no edge
]


def answers(store, browse):
    """Every counting read the UI makes, as plain values to compare."""
    def call(fn, *args):
        return runtime.call(functools.partial(fn, store, *args))

    found = {
        "tallies": sorted((repr(t.key), t.n, t.passed, t.failed, t.error, t.skipped, round(t.latency_ms, 6), t.timed,
                           round(t.cost_usd, 9), t.first, t.last) for t in call(tallies, browse)),
        "verdicts": sorted(call(verdict_counts, browse).items(), key=repr),
        "counts": call(counts, browse),
        "segments": call(segments, browse, "agent"),
        "versions": call(segments, browse, "version"),
    }
    for key in META:  # each key's counts (`stores._rollup_meta`): text, numbers, true/false, missing
        found[f"meta {key}"] = call(segments, browse, f"meta:{key}")
    for bucket in ("hour", "day", "10min"):
        found[f"rates {bucket}"] = call(pass_rates, browse, bucket)
        found[f"runs {bucket}"] = [(at, n, None if lat is None else round(lat, 6), None if cost is None
                                    else round(cost, 9), None if judged is None else round(judged, 9))
                                   for at, n, lat, cost, judged in call(run_series, browse, bucket)]
    return found


def one_pass(*batches):
    store = MemoryStore()
    for batch in batches:
        runtime.call(store.write, batch)
    return store


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request, tmp_path):
    store = (SQLiteStore(tmp_path / "evals.db") if request.param == "sqlite"
             else PostgresStore(request.getfixturevalue("postgres_dsn")))
    yield store
    runtime.call(store.aclose)


def test_the_range_is_cut_at_whole_hours_and_its_edges_go_to_the_records():
    at = datetime(2026, 11, 30, 10, 20, tzinfo=UTC)
    assert split(None, None) == Split((None, None), ())
    assert split(at, None) == Split(("2026-11-30T11", None), ((at, at.replace(hour=11, minute=0)),))
    assert split(at.replace(minute=0), at.replace(hour=14, minute=5)) == Split(
        ("2026-11-30T10", "2026-11-30T14"), ((at.replace(hour=14, minute=0), at.replace(hour=14, minute=5)),))
    assert split(at, at.replace(minute=50)) == Split(None, ((at, at.replace(minute=50)),))  # within one hour


@pytest.mark.parametrize("browse", BROWSES)
def test_the_rollup_answers_as_the_records_do(sql_store, browse):
    runtime.call(sql_store.write, records(0, 400))
    assert answers(sql_store, browse) == answers(one_pass(records(0, 400)), browse)


def test_records_written_after_a_page_read_the_rollup_are_counted_once(sql_store, monkeypatch):
    monkeypatch.setattr(_rollup, "BATCH", 7)  # SQLite folds them 7 at a time, the store free between
    runtime.call(sql_store.write, records(0, 200))
    answers(sql_store, Browse())  # a page: SQLite's rollup catches up to here
    later = records(200, 400) + records(100, 150, late=True)  # new hours, old hours, one run's third record
    runtime.call(sql_store.write, later[:120])
    answers(sql_store, BROWSES[1])
    runtime.call(sql_store.write, later[120:])
    runtime.call(sql_store.write, later[:50])  # a batch written again: ids already stored, nothing counted twice
    truth = one_pass(records(0, 200), later)
    for browse in BROWSES:
        assert answers(sql_store, browse) == answers(truth, browse), browse


def test_a_key_whose_values_are_all_different_is_not_kept_and_its_pages_read_the_records(sql_store, monkeypatch):
    """A request id in the metadata: its counts would be as large as the records, so once past
    `FREE` rows they are dropped, the key is marked, and its pages count the records; a key of a few
    values is kept."""
    from judgehooks.stores import _rollup_meta

    monkeypatch.setattr(_rollup_meta, "FREE", 50)
    monkeypatch.setattr(_rollup, "BATCH", 100)  # SQLite folds 100 at a time: refused after the first batches
    batch = [EvalRecord(id=f"m-{i}", created_at=NOW - timedelta(hours=4) + timedelta(seconds=36 * i),
                        status=("passed", "failed")[i % 2], evaluator="helpful", mode="binary", passed=i % 2 == 0,
                        metadata={"plan": ("free", "pro", "team")[i % 3], "request": f"q-{i}"}) for i in range(400)]
    runtime.call(sql_store.write, batch)
    truth = one_pass(batch)
    for browse in (Browse(), Browse(RecordFilter(since=NOW - timedelta(hours=3, minutes=10)))):
        for by in ("meta:request", "meta:plan"):
            assert runtime.call(functools.partial(segments, sql_store, browse, by)) == runtime.call(
                functools.partial(segments, truth, browse, by)), (browse, by)
    state = "SELECT key, upto FROM eval_records_rollup_meta_state ORDER BY key"
    kept = "SELECT key, COUNT(*) FROM eval_records_rollup_meta GROUP BY key"
    if isinstance(sql_store, SQLiteStore):
        conn = sqlite3.connect(sql_store.path)
        marks, rows = conn.execute(state).fetchall(), dict(conn.execute(kept).fetchall())
        conn.close()
    else:
        import psycopg

        with psycopg.connect(sql_store.dsn) as conn:
            marks, rows = conn.execute(state).fetchall(), dict(conn.execute(kept).fetchall())
    assert dict(marks)["request"] == _rollup_meta.REFUSED and "request" not in rows
    assert dict(marks)["plan"] > 0 and rows["plan"] == 4 * 2 * 3  # hours, verdicts, plans


def test_counts_are_kept_for_the_keys_most_recently_asked_for(sql_store, monkeypatch):
    """Asking for key after key cannot fill the disk: past `KEYS` keys, a new one drops the least
    recently used key's counts; that key asked for again is counted afresh, never twice."""
    from judgehooks.stores import _rollup_meta

    monkeypatch.setattr(_rollup_meta, "KEYS", 2)
    runtime.call(sql_store.write, records(0, 400))
    truth = one_pass(records(0, 400))

    def kept():
        query = "SELECT key FROM eval_records_rollup_meta_state UNION SELECT key FROM eval_records_rollup_meta"
        if isinstance(sql_store, SQLiteStore):
            conn = sqlite3.connect(sql_store.path)
            found = {r[0] for r in conn.execute(query)}
            conn.close()
            return found
        import psycopg

        with psycopg.connect(sql_store.dsn) as conn:
            return {r[0] for r in conn.execute(query)}

    for key, then in (("plan", {"plan"}), ("tier", {"plan", "tier"}), ("beta", {"tier", "beta"}),
                      ("tier", {"tier", "beta"}), ("plan", {"tier", "plan"}), ("beta", {"plan", "beta"})):
        for browse in BROWSES[:3]:
            assert runtime.call(functools.partial(segments, sql_store, browse, f"meta:{key}")) == runtime.call(
                functools.partial(segments, truth, browse, f"meta:{key}")), (key, browse)
        assert kept() == then, key


def test_a_sqlite_file_written_before_the_rollup_gets_it_on_its_first_page(tmp_path):
    path = tmp_path / "evals.db"
    runtime.call(SQLiteStore(path).write, records(0, 300))
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '%rollup%'").fetchall() == []  # no cost
    conn.close()
    store = SQLiteStore(path)
    assert answers(store, Browse()) == answers(one_pass(records(0, 300)), Browse())
    store.close()


def test_a_postgres_table_written_before_the_rollup_is_filled_once(postgres_dsn):
    import psycopg

    store = PostgresStore(postgres_dsn)
    runtime.call(store.write, records(0, 300))
    runtime.call(store.aclose)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # a table of a version before the rollup
        for table in ("eval_records_rollup", "eval_records_rollup_runs", "eval_records_rollup_state",
                      "eval_records_rollup_meta", "eval_records_rollup_meta_state"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("ALTER TABLE eval_records DROP COLUMN txid")
        rest = ", ".join(FIELDS[1:])  # five more records, written without a transaction id
        conn.execute(f"INSERT INTO eval_records (id, {rest}) SELECT 'old-' || id, {rest} FROM eval_records LIMIT 5")
    reopened = PostgresStore(postgres_dsn)  # first use: the column and tables made, instantly
    runtime.call(reopened.write, records(350, 400))
    old = runtime.call(functools.partial(reopened.query, limit=None))
    truth = one_pass([r for r in old])  # every record, the ones written before the rollup too
    for browse in BROWSES[:3]:
        assert answers(reopened, browse) == answers(truth, browse)
    runtime.call(reopened.aclose)
    again = PostgresStore(postgres_dsn)  # a second process: nothing folded twice
    assert answers(again, Browse()) == answers(truth, Browse())
    runtime.call(again.aclose)


def test_a_postgres_transaction_still_open_during_a_page_is_counted_once_it_ends(postgres_dsn):
    """The rollup reaches the oldest transaction still running: a record whose transaction is open
    while a page folds is neither folded nor lost (nor seen: not committed), and is counted once
    after it commits."""
    import psycopg

    from judgehooks.stores._postgres import _row

    store = PostgresStore(postgres_dsn)
    runtime.call(store.write, records(0, 200))
    late = records(200, 260)
    names = ", ".join(FIELDS)
    with psycopg.connect(postgres_dsn) as slow:  # a writer in another process, slow to commit
        with slow.cursor() as cur:
            cur.executemany(f"INSERT INTO eval_records ({names}) VALUES ({', '.join(['%s'] * len(FIELDS))})",
                            [_row(r) for r in late[:30]])
        runtime.call(store.write, late[30:])  # committed while the slow one is open
        assert answers(store, Browse()) == answers(one_pass(records(0, 200), late[30:]), Browse())
        slow.commit()
    truth = one_pass(records(0, 260))
    assert answers(store, Browse()) == answers(truth, Browse())  # folded now, once
    assert answers(store, BROWSES[1]) == answers(truth, BROWSES[1])
    runtime.call(store.aclose)


def test_two_postgres_writers_of_one_runs_records_count_the_run_once(postgres_dsn):
    """Each of a run's records in one hour, written by two stores (two processes' pools) at the same
    time: the run is counted once per hour."""
    first, second = PostgresStore(postgres_dsn), PostgresStore(postgres_dsn)
    runtime.call(first.write, records(0, 3))  # the schema and trigger, made once
    batch = records(3, 600)
    mine, theirs = batch[0::2], batch[1::2]  # every run's records split between the writers
    errors = []

    def write(store, part):
        try:
            for i in range(0, len(part), 7):
                runtime.call(store.write, part[i:i + 7])
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(store, part)) for store, part in ((first, mine), (second, theirs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    truth = one_pass(records(0, 600))
    assert answers(first, Browse()) == answers(truth, Browse())
    runtime.call(first.aclose)
    runtime.call(second.aclose)
