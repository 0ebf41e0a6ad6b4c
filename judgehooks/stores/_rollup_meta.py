"""Hourly counts of one metadata key's values, kept beside the records for the pages that break
verdicts down by a key (`/segments?by=meta:KEY`), so that they answer in milliseconds at a million
records instead of reading every record's metadata.

They are made for a key the first time a page asks for it, then brought up to date by the pages
that read them, as the hourly rollup is (`stores._rollup`: its hours, its columns, its reach by
rowid or transaction id, its reading of the records past that reach). A value is the metadata's
value as `stores._browse.meta_text` writes it, so that the counts and the records agree.

A key whose values are nearly all different (a request id) gains nothing: once its counts hold more
than `FREE` rows and more than one for every `RATIO` records counted, they are dropped and that key's
pages read the records, as before. Counts are kept for the `KEYS` keys most recently asked for."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from . import _rollup
from ._metadata import meta_sql as _meta_sql
from ._rollup import _PG_HOUR, _SQLITE_HOUR, _key, rollup_table

#: a key's counts may hold this many rows whatever the ratio
FREE = 10_000
#: past `FREE` rows, a key's counts must hold at most one row for this many records
RATIO = 4
#: the state of a key whose counts were dropped (its pages read the records)
REFUSED = -1
#: the keys whose counts are kept at most: a key asked for beyond them drops the least recently used
#: one's (so that asking for key after key cannot fill the disk)
KEYS = 16
#: the rollup's key columns (`stores._rollup.KEY`), here preceded by the metadata key and followed by its value
_KEY = ("key", "hour", "evaluator", "version", "agent", "team", "status", "rejudge", "value")


def meta_table(table: str) -> str:
    return f"{rollup_table(table)}_meta"


def setup(table: str, upto_type: str) -> tuple[str, ...]:
    meta = meta_table(table)
    return (f"CREATE TABLE IF NOT EXISTS {meta} ({', '.join(f'{c} TEXT NOT NULL' for c in _KEY if c != 'rejudge')}, "
            f"rejudge INTEGER NOT NULL, n BIGINT NOT NULL, PRIMARY KEY ({', '.join(_KEY)}))",
            f"CREATE TABLE IF NOT EXISTS {meta}_state (key TEXT PRIMARY KEY, upto {upto_type}, "
            "folded BIGINT NOT NULL DEFAULT 0, used DOUBLE PRECISION NOT NULL DEFAULT 0)")


def _fold(table: str, mark: str, key: str, which: str) -> tuple[str, list[Any]]:
    """The statement that adds the records `which` selects to `key`'s counts, and its leading arguments."""
    meta = meta_table(table)
    value, bound = _meta_sql(mark, key)
    hour = _SQLITE_HOUR if mark == "?" else _PG_HOUR
    source = (f"SELECT {hour} AS hour, evaluator, evaluator_version, agent_id, team_id, status, rejudge_of, "
              f"{value} AS value FROM {table} r WHERE {which}")
    return (f"INSERT INTO {meta} ({', '.join(_KEY)}, n) SELECT {mark}, hour, evaluator, {_key('evaluator_version')}, "
            f"{_key('agent_id')}, {_key('team_id')}, status, CASE WHEN rejudge_of IS NULL THEN 0 ELSE 1 END, "
            f"{_key('value')}, COUNT(*) FROM ({source}) s WHERE true GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 "
            f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET n = {meta}.n + excluded.n"), [key, *bound]


def _worth_it(rows: int, folded: int) -> bool:
    return rows <= FREE or rows * RATIO <= folded


def sqlite_catch_up(conn: sqlite3.Connection, table: str, key: str) -> tuple[bool, int | None]:
    """Fold into `key`'s counts up to `stores._rollup.BATCH` of the records written since they were
    last brought up to date, in one write transaction (as `stores._rollup.sqlite_catch_up`): (more are
    left, the rowid they now reach), or (False, None) when the key's counts are not kept."""
    meta = meta_table(table)
    for sql in setup(table, "INTEGER"):
        conn.execute(sql)
    fold, leading = _fold(table, "?", key, "r.rowid > ? AND r.rowid <= ?")
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(f"SELECT upto, folded FROM {meta}_state WHERE key = ?", (key,)).fetchone()
        if row is None:  # a key not asked for before (or dropped): room for it among the `KEYS`
            while conn.execute(f"SELECT COUNT(*) FROM {meta}_state").fetchone()[0] >= KEYS:
                (victim,) = conn.execute(f"SELECT key FROM {meta}_state ORDER BY used LIMIT 1").fetchone()
                conn.execute(f"DELETE FROM {meta} WHERE key = ?", (victim,))
                conn.execute(f"DELETE FROM {meta}_state WHERE key = ?", (victim,))
        upto, folded = row if row else (0, 0)
        reach, last = upto, None
        if upto != REFUSED:
            last, added = conn.execute(f"SELECT MAX(rowid), COUNT(*) FROM (SELECT rowid FROM {table} WHERE "
                                       f"rowid > ? ORDER BY rowid LIMIT {_rollup.BATCH})", (upto,)).fetchone()
        if last is not None:
            conn.execute(fold, (*leading, upto, last))
            folded += added
            rows = conn.execute(f"SELECT COUNT(*) FROM {meta} WHERE key = ?", (key,)).fetchone()[0]
            reach = last if _worth_it(rows, folded) else REFUSED
            if reach == REFUSED:
                conn.execute(f"DELETE FROM {meta} WHERE key = ?", (key,))
        conn.execute(f"INSERT INTO {meta}_state (key, upto, folded, used) VALUES (?, ?, ?, ?) ON CONFLICT (key) "
                     "DO UPDATE SET upto = excluded.upto, folded = excluded.folded, used = excluded.used",
                     (key, reach, folded, time.time()))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if reach == REFUSED:
        return False, None
    return last is not None and last - upto >= _rollup.BATCH, reach


async def postgres_catch_up(conn: Any, table: str, key: str) -> int | None:
    """Fold into `key`'s counts the records of every transaction ended since they were last brought up
    to date (as `stores._rollup.postgres_catch_up`, the key's state row locked): the transaction id
    they now reach, or None when the key's counts are not kept."""
    meta = meta_table(table)

    async def one(query: str, args: list[Any]) -> Any:
        return await (await conn.execute(query, args)).fetchone()

    async with conn.transaction():
        if await one(f"SELECT 1 FROM {meta}_state WHERE key = %s", [key]) is None:  # room for a new key
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [meta])  # one maker at a time
            while (await one(f"SELECT COUNT(*) FROM {meta}_state WHERE key <> %s", [key]))[0] >= KEYS:
                # the least recently used key, once no page is folding it (its state row locked)
                victim = await one(f"SELECT key FROM {meta}_state WHERE key <> %s ORDER BY used LIMIT 1 "
                                   "FOR UPDATE", [key])
                if victim is None:
                    break
                await conn.execute(f"DELETE FROM {meta} WHERE key = %s", victim)
                await conn.execute(f"DELETE FROM {meta}_state WHERE key = %s", victim)
        await conn.execute(f"INSERT INTO {meta}_state (key, upto, used) VALUES (%s, NULL, %s) ON CONFLICT (key) "
                           "DO UPDATE SET used = excluded.used", [key, time.time()])
        upto, folded = await one(f"SELECT upto, folded FROM {meta}_state WHERE key = %s FOR UPDATE", [key])
        if upto == REFUSED:
            return None
        oldest = (await one("SELECT txid_snapshot_xmin(txid_current_snapshot())", []))[0]
        if upto is not None and oldest <= upto:
            return int(upto)
        which = "(r.txid IS NULL OR r.txid < %s)" if upto is None else "r.txid >= %s AND r.txid < %s"
        args = [oldest] if upto is None else [upto, oldest]
        fold, leading = _fold(table, "%s", key, which)
        await conn.execute(fold, [*leading, *args])
        folded += (await one(f"SELECT COUNT(*) FROM {table} r WHERE {which}", args))[0]
        rows = (await one(f"SELECT COUNT(*) FROM {meta} WHERE key = %s", [key]))[0]
        kept = _worth_it(rows, folded)
        if not kept:
            await conn.execute(f"DELETE FROM {meta} WHERE key = %s", [key])
        await conn.execute(f"UPDATE {meta}_state SET upto = %s, folded = %s WHERE key = %s",
                           [oldest if kept else REFUSED, folded, key])
    return int(oldest) if kept else None
