"""Hourly counts kept beside the records, so that the `judgehooks ui` pages that count every record
(the overview's rows and charts, calibration, the compare page's totals) answer in milliseconds at a
million records instead of reading them all.

The rollup table holds, per hour and per evaluator, version, agent, team, status and "is a
re-judgement", the records' count, their judge latency and cost sums, their first and last times,
and the runs among them: a run counts once in each hour it has records in (its first record there),
with its own latency and cost. It is brought up to date by the pages that read it, from the records
written since the last one: writing a record costs nothing more, and a store written before the
rollup existed has it filled on its first page. SQLite's reaches a rowid (its writers take turns, so
every record up to it is there); PostgreSQL's reaches a transaction id, the oldest still running
(every record of an older transaction is there and no more can come). The records past it are read
from the table, so a count never misses a record written a moment ago. Records are only ever
added, never changed or removed, so the counts stay exact.

A question the rollup can answer (`covers`: filters by evaluator, version, agent, team and time
only) is asked of it for the whole hours of its range and of the records for the parts of an hour at
either edge; any other question, and any store without SQL, reads the records (`stores._browse`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

#: the hour as ISO text: the first 13 characters of "2026-11-30T12:34:56..." (as `_series.CUTS`)
HOUR = 13
#: the rollup's key, then its values (each sum is 0 with no value; its ``*_n`` count says None)
KEY = ("hour", "evaluator", "version", "agent", "team", "status", "rejudge")
VALUES = ("n", "latency", "timed", "cost", "first_at", "last_at", "runs", "run_latency", "run_latency_n",
          "run_cost", "run_cost_n", "judged", "judged_n")
_SQLITE_HOUR = f"substr(created_at, 1, {HOUR})"
_PG_HOUR = """to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24')"""


def rollup_table(table: str) -> str:
    return f"{table}_rollup"


def _key(column: str) -> str:
    """A nullable column as a key that never holds NULL (a unique key ignores NULLs): '' for NULL,
    '=' and the value otherwise (read back by `unkey`)."""
    return f"CASE WHEN {column} IS NULL THEN '' ELSE '=' || {column} END"


def unkey(value: str) -> str | None:
    return None if value == "" else value[1:]


def _aggregate(source: str, hour: str) -> str:
    """The rollup rows of the records `source` selects (which names each record's ``first_run``)."""
    return (f"SELECT {hour}, evaluator, {_key('evaluator_version')}, {_key('agent_id')}, {_key('team_id')}, status, "
            "CASE WHEN rejudge_of IS NULL THEN 0 ELSE 1 END, COUNT(*), SUM(COALESCE(latency_ms, 0)), "
            "COUNT(latency_ms), SUM(COALESCE(cost_usd, 0)), MIN(created_at), MAX(created_at), SUM(first_run), "
            "SUM(CASE WHEN first_run = 1 THEN COALESCE(run_latency_ms, 0) ELSE 0 END), "
            "SUM(CASE WHEN first_run = 1 AND run_latency_ms IS NOT NULL THEN 1 ELSE 0 END), "
            "SUM(CASE WHEN first_run = 1 THEN COALESCE(run_cost_usd, 0) ELSE 0 END), "
            "SUM(CASE WHEN first_run = 1 AND run_cost_usd IS NOT NULL THEN 1 ELSE 0 END), "
            "SUM(CASE WHEN run_id IS NOT NULL THEN COALESCE(cost_usd, 0) ELSE 0 END), "
            "SUM(CASE WHEN run_id IS NOT NULL AND cost_usd IS NOT NULL THEN 1 ELSE 0 END) "
            f"FROM ({source}) s WHERE true GROUP BY 1, 2, 3, 4, 5, 6, 7")


def _upsert(rollup: str, least: str, greatest: str) -> str:
    sums = ", ".join(f"{v} = {rollup}.{v} + excluded.{v}" for v in VALUES if v not in ("first_at", "last_at"))
    return (f"INSERT INTO {rollup} ({', '.join(KEY + VALUES)}) {{rows}} ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET "
            f"{sums}, first_at = {least}({rollup}.first_at, excluded.first_at), "
            f"last_at = {greatest}({rollup}.last_at, excluded.last_at)")


def _create(rollup: str, time_type: str) -> str:
    kinds = {v: time_type if v.endswith("_at") else "DOUBLE PRECISION" if v in _REALS else "BIGINT" for v in VALUES}
    values = ", ".join(f"{v} {kind} NOT NULL" for v, kind in kinds.items())
    return (f"CREATE TABLE IF NOT EXISTS {rollup} (hour TEXT NOT NULL, evaluator TEXT NOT NULL, version TEXT NOT NULL, "
            f"agent TEXT NOT NULL, team TEXT NOT NULL, status TEXT NOT NULL, rejudge INTEGER NOT NULL, {values}, "
            f"PRIMARY KEY ({', '.join(KEY)}))")


def _create_seen(rollup: str) -> str:
    """The hours each run has been counted in (a run counts once per hour)."""
    return (f"CREATE TABLE IF NOT EXISTS {rollup}_runs (run_id TEXT NOT NULL, hour TEXT NOT NULL, "
            "PRIMARY KEY (run_id, hour))")


_REALS = ("latency", "cost", "run_latency", "run_cost", "judged")
#: the columns a rollup reads from a record
_COLUMNS = ("evaluator", "evaluator_version", "agent_id", "team_id", "status", "rejudge_of", "latency_ms",
            "cost_usd", "created_at", "run_id", "run_latency_ms", "run_cost_usd")


#: records folded into SQLite's rollup per write transaction: a concurrent writer waits at most this long
BATCH = 20000


def sqlite_catch_up(conn: sqlite3.Connection, table: str) -> tuple[bool, int]:
    """Create SQLite's rollup if this file has none, and fold into it up to `BATCH` of the records
    written since the last page that read it, in one write transaction (as the search index,
    `_search`): writing a record costs nothing more, and an older file's rollup is filled on its first
    page (a million records: about ten seconds, once). Records are only ever added, so the rowid says
    how far it reaches. (more are left: call again, the connection free between calls; the rowid it
    now reaches: the records past it are read from the table, `Browse.unfolded`)."""
    rollup = rollup_table(table)
    conn.execute(_create(rollup, "TEXT"))
    conn.execute(f"CREATE TABLE IF NOT EXISTS {rollup}_state (one INTEGER PRIMARY KEY CHECK (one = 1), upto INTEGER)")
    conn.execute(_create_seen(rollup))
    # A run's first record in an hour: the first of this batch's records of that run and hour, when no
    # earlier batch had one (the hours each run was seen in: a table the catch-up keeps, not an index
    # every write would pay for)
    hour = f"substr(r.created_at, 1, {HOUR})"
    first = (f"CASE WHEN r.run_id IS NOT NULL AND ROW_NUMBER() OVER (PARTITION BY r.run_id, {hour} ORDER BY r.rowid) "
             f"= 1 AND NOT EXISTS (SELECT 1 FROM {rollup}_runs s WHERE s.run_id = r.run_id AND s.hour = {hour}) "
             "THEN 1 ELSE 0 END")
    fold = _upsert(rollup, "min", "max").format(rows=_aggregate(
        f"SELECT {', '.join('r.' + c for c in _COLUMNS)}, {first} AS first_run FROM {table} r "
        "WHERE r.rowid > ? AND r.rowid <= ?", _SQLITE_HOUR))
    seen = (f"INSERT OR IGNORE INTO {rollup}_runs (run_id, hour) SELECT DISTINCT run_id, {_SQLITE_HOUR} FROM {table} "
            "WHERE rowid > ? AND rowid <= ? AND run_id IS NOT NULL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(f"SELECT upto FROM {rollup}_state WHERE one = 1").fetchone()
        upto = row[0] if row else 0
        last = conn.execute(f"SELECT MAX(rowid) FROM (SELECT rowid FROM {table} WHERE rowid > ? ORDER BY rowid "
                            f"LIMIT {BATCH})", (upto,)).fetchone()[0]
        if last is not None:
            conn.execute(fold, (upto, last))
            conn.execute(seen, (upto, last))
            conn.execute(f"INSERT INTO {rollup}_state (one, upto) VALUES (1, ?) "
                         "ON CONFLICT (one) DO UPDATE SET upto = excluded.upto", (last,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if last is not None and last - upto >= BATCH:
        return True, last
    return False, last if last is not None else upto


def postgres_setup(table: str) -> tuple[str, ...]:
    """The statements that give a PostgreSQL table its rollup (run with the schema, in one transaction):
    the tables, and each record's transaction id (``txid``, set by the database on insert: an older
    table's records have none, and are folded first), which says how far the rollup reaches."""
    rollup = rollup_table(table)
    return (_create(rollup, "TIMESTAMPTZ"), _create_seen(rollup),
            f"CREATE TABLE IF NOT EXISTS {rollup}_state (one INTEGER PRIMARY KEY CHECK (one = 1), upto BIGINT)",
            f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS txid BIGINT",
            f"ALTER TABLE {table} ALTER COLUMN txid SET DEFAULT txid_current()",
            f"CREATE INDEX IF NOT EXISTS ix_{table}_txid ON {table} (txid)")


async def postgres_catch_up(conn: Any, table: str) -> int:
    """Fold into PostgreSQL's rollup the records of every transaction that has ended since the last
    page (those older than the oldest one still running: no record of theirs can appear any more), in
    one transaction, one page at a time (the state row locked). Returns the transaction id the rollup
    now reaches: the records of that one and later are read from the table (`Browse.unfolded`)."""
    rollup = rollup_table(table)
    hour = _PG_HOUR.replace("created_at", "r.created_at")
    async with conn.transaction():
        await conn.execute(f"INSERT INTO {rollup}_state (one, upto) VALUES (1, NULL) ON CONFLICT (one) DO NOTHING")
        upto = (await (await conn.execute(f"SELECT upto FROM {rollup}_state WHERE one = 1 FOR UPDATE")).fetchone())[0]
        oldest = (await (await conn.execute("SELECT txid_snapshot_xmin(txid_current_snapshot())")).fetchone())[0]
        if upto is not None and oldest <= upto:
            return int(upto)
        which = "(r.txid IS NULL OR r.txid < %s)" if upto is None else "r.txid >= %s AND r.txid < %s"
        args = [oldest] if upto is None else [upto, oldest]
        # A run's first record in an hour: the first of these of that run and hour, when no earlier fold
        # counted the run in that hour
        first = (f"CASE WHEN r.run_id IS NOT NULL AND ROW_NUMBER() OVER (PARTITION BY r.run_id, {hour} ORDER BY "
                 f"r.created_at, r.id) = 1 AND NOT EXISTS (SELECT 1 FROM {rollup}_runs s WHERE s.run_id = r.run_id "
                 f"AND s.hour = {hour}) THEN 1 ELSE 0 END")
        source = f"SELECT {', '.join('r.' + c for c in _COLUMNS)}, {first} AS first_run FROM {table} r WHERE {which}"
        await conn.execute(_upsert(rollup, "LEAST", "GREATEST").format(rows=_aggregate(source, _PG_HOUR)), args)
        await conn.execute(f"INSERT INTO {rollup}_runs (run_id, hour) SELECT DISTINCT r.run_id, {hour} FROM {table} r "
                           f"WHERE {which} AND r.run_id IS NOT NULL ON CONFLICT DO NOTHING", args)
        await conn.execute(f"UPDATE {rollup}_state SET upto = %s WHERE one = 1", [oldest])
    return int(oldest)


# ---- reading ----------------------------------------------------------------------------------


def covers(browse: Any) -> bool:
    """Whether the rollup can answer `browse` (a `stores._browse.Browse`): filtered by evaluator,
    version, agent, team and time only (verdicts only, or every record)."""
    where = browse.where
    return (where.status is None and where.run_id is None and browse.session_id is None and browse.scope is None
            and browse.user_id is None and not browse.metadata and browse.text is None and not browse.routed
            and browse.borderline is None and browse.unfolded is None)


@dataclass(frozen=True, slots=True)
class Split:
    """A range cut at whole hours: the rollup answers ``hours`` (hour texts, from inclusive, to
    exclusive, None for open); the records answer ``edges`` (the parts of an hour at either end)."""

    hours: tuple[str | None, str | None] | None
    edges: tuple[tuple[datetime | None, datetime | None], ...]


def split(since: datetime | None, until: datetime | None) -> Split:
    def floor(moment: datetime) -> datetime:
        return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)

    start = None if since is None else floor(since) + (timedelta(hours=1) if floor(since) != since else timedelta(0))
    end = None if until is None else floor(until)
    if start is not None and end is not None and start >= end:  # within one hour, or two parts of two: all records
        return Split(None, ((since, until),))
    edges = []
    if since is not None and start is not None and start != since:
        edges.append((since, start))
    if until is not None and end is not None and end != until:
        edges.append((end, until))
    text = (None if start is None else start.isoformat()[:HOUR], None if end is None else end.isoformat()[:HOUR])
    return Split(text, tuple(edges))


def where(browse: Any, hours: tuple[str | None, str | None], mark: str) -> tuple[str, list[Any]]:
    """The rollup's condition for `browse` within `hours` (verdicts only when `browse.judged`)."""
    found, args = ["true"], []
    for column, value in (("evaluator", browse.where.evaluator), ("version", browse.version),
                          ("agent", browse.where.agent_id), ("team", browse.where.team_id)):
        if value is not None:
            found.append(f"{column} = {mark}")
            args.append(value if column == "evaluator" else f"={value}")
    if hours[0] is not None:
        found.append(f"hour >= {mark}")
        args.append(hours[0])
    if hours[1] is not None:
        found.append(f"hour < {mark}")
        args.append(hours[1])
    if browse.judged:
        found.append("status IN ('passed', 'failed') AND rejudge = 0")
    return " AND ".join(found), args


Run = Callable[[str, list[Any]], Any]
