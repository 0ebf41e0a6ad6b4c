"""Hourly counts kept beside the records, so that the `judgehooks ui` pages that count every record
(the overview's rows and charts, calibration, the compare page's totals) answer in milliseconds at a
million records instead of reading them all.

The rollup table holds, per hour and per evaluator, version, agent, team, status and "is a
re-judgement", the records' count, their judge latency and cost sums, their first and last times,
and the runs among them: a run counts once in each hour it has records in (its first record there),
with its own latency and cost. SQLite's is brought up to date by the pages that read it, from the
records written since (as its search index: writing a record costs nothing more, and a file written
before the rollup existed has it filled on its first page). PostgreSQL's is kept by a statement
trigger over the inserted rows, in the insert's own transaction, its writers taking turns on one
advisory lock so that two of them never count one run twice; a table written before has it filled
when the store first opens it. Records are only ever added, never changed or removed, so the counts
stay exact.

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


_REALS = ("latency", "cost", "run_latency", "run_cost", "judged")
#: the columns a rollup reads from a record
_COLUMNS = ("evaluator", "evaluator_version", "agent_id", "team_id", "status", "rejudge_of", "latency_ms",
            "cost_usd", "created_at", "run_id", "run_latency_ms", "run_cost_usd")


def _backfill_source(table: str, hour: str) -> str:
    return (f"SELECT {', '.join(_COLUMNS)}, CASE WHEN run_id IS NOT NULL AND ROW_NUMBER() OVER "
            f"(PARTITION BY run_id, {hour} ORDER BY created_at, id) = 1 THEN 1 ELSE 0 END AS first_run FROM {table}")


#: records folded into SQLite's rollup per write transaction: a concurrent writer waits at most this long
BATCH = 20000


def sqlite_catch_up(conn: sqlite3.Connection, table: str) -> bool:
    """Create SQLite's rollup if this file has none, and fold into it up to `BATCH` of the records
    written since the last page that read it, in one write transaction (as the search index,
    `_search`): writing a record costs nothing more, and an older file's rollup is filled on its first
    page (a million records: about ten seconds, once). Records are only ever added, so the rowid says
    how far it reaches. True while more are left: call again (the connection free between calls)."""
    rollup = rollup_table(table)
    conn.execute(_create(rollup, "TEXT"))
    conn.execute(f"CREATE TABLE IF NOT EXISTS {rollup}_state (one INTEGER PRIMARY KEY CHECK (one = 1), upto INTEGER, "
                 "analyzed INTEGER)")
    # A run's first record in an hour: none of that run and hour has a smaller rowid (`ix_..._run`).
    first = (f"CASE WHEN r.run_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {table} p WHERE p.run_id = r.run_id "
             f"AND p.created_at >= substr(r.created_at, 1, {HOUR}) AND p.created_at < substr(r.created_at, 1, {HOUR}) "
             "|| ';' AND p.rowid < r.rowid) THEN 1 ELSE 0 END")  # ';' follows the ':' after the hour
    fold = _upsert(rollup, "min", "max").format(rows=_aggregate(
        f"SELECT {', '.join('r.' + c for c in _COLUMNS)}, {first} AS first_run FROM {table} r "
        "WHERE r.rowid > ? AND r.rowid <= ?", _SQLITE_HOUR))
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(f"SELECT upto FROM {rollup}_state WHERE one = 1").fetchone()
        upto = row[0] if row else 0
        last = conn.execute(f"SELECT MAX(rowid) FROM (SELECT rowid FROM {table} WHERE rowid > ? ORDER BY rowid "
                            f"LIMIT {BATCH})", (upto,)).fetchone()[0]
        if last is not None:
            conn.execute(fold, (upto, last))
            conn.execute(f"INSERT INTO {rollup}_state (one, upto) VALUES (1, ?) "
                         "ON CONFLICT (one) DO UPDATE SET upto = excluded.upto", (last,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if last is not None and last - upto >= BATCH:
        return True
    _analyze(conn, table, rollup)
    return False


def _analyze(conn: sqlite3.Connection, table: str, rollup: str) -> None:
    """Give SQLite's planner the records' statistics each time their number has doubled: without them
    it reads a whole evaluator's records for the part of an hour one index gives in a millisecond, or
    a quarter of the file for the newest failures of one evaluator. A whole ANALYZE (a sampled one
    reads the first entries of each index, one evaluator's, and misjudges them all): 1.4 s at a
    million records, once per doubling."""
    upto, analyzed = conn.execute(f"SELECT upto, analyzed FROM {rollup}_state WHERE one = 1").fetchone() or (0, 0)
    if not upto or upto < 2 * (analyzed or 0) or upto < 1000:
        return
    conn.execute(f"ANALYZE {table}")
    conn.execute(f"UPDATE {rollup}_state SET analyzed = ? WHERE one = 1", (upto,))


def postgres_setup(table: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(the rollup table's name, the statements that create it and its trigger, the statements that
    fill it from the records already there): run in one transaction when the trigger is missing, the
    filling only when the table is new (the records' table locked against writers meanwhile)."""
    rollup = rollup_table(table)
    upsert = _upsert(rollup, "LEAST", "GREATEST")
    hour_of = "date_trunc('hour', {0}.created_at AT TIME ZONE 'UTC')"
    # Each run's first record in an hour: the first of the inserted ones, when no record of that run and
    # hour was there before (the rows this statement inserted are already in the table: left out by id).
    source = (f"SELECT f.*, CASE WHEN f.run_id IS NOT NULL AND ROW_NUMBER() OVER (PARTITION BY f.run_id, "
              f"{hour_of.format('f')} ORDER BY f.created_at, f.id) = 1 AND NOT EXISTS (SELECT 1 FROM {table} r "
              f"WHERE r.run_id = f.run_id AND {hour_of.format('r')} = {hour_of.format('f')} AND r.id NOT IN "
              "(SELECT id FROM fresh)) THEN 1 ELSE 0 END AS first_run FROM fresh f")
    function = (f"CREATE OR REPLACE FUNCTION {table}_rollup_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"PERFORM pg_advisory_xact_lock(hashtext('judgehooks-rollup:{table}')); "
                f"{upsert.format(rows=_aggregate(source, _PG_HOUR))}; RETURN NULL; END $$")
    trigger = (f"CREATE TRIGGER {table}_rollup_insert AFTER INSERT ON {table} REFERENCING NEW TABLE AS fresh "
               f"FOR EACH STATEMENT EXECUTE FUNCTION {table}_rollup_insert()")
    return (rollup, (_create(rollup, "TIMESTAMPTZ"), function, trigger),
            (f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE",
             upsert.format(rows=_aggregate(_backfill_source(table, _PG_HOUR), _PG_HOUR))))


# ---- reading ----------------------------------------------------------------------------------


def covers(browse: Any) -> bool:
    """Whether the rollup can answer `browse` (a `stores._browse.Browse`): filtered by evaluator,
    version, agent, team and time only (verdicts only, or every record)."""
    where = browse.where
    return (where.status is None and where.run_id is None and browse.session_id is None and browse.scope is None
            and browse.user_id is None and not browse.metadata and browse.text is None and not browse.routed
            and browse.borderline is None)


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
