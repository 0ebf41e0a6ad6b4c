"""Reading a store for people browsing it (the `judgehooks ui` pages): a page of records under more
filters than `Store.query` takes, and tallies per agent, evaluator and version or per time bucket.
SQLite and PostgreSQL compute them in the database (one indexed query each, so a page stays fast on
a large store); any other store gets the same answer from one pass over its records. A page asks a
JSONL store through `for_page`: its file read once for the page, however many questions it asks."""

from __future__ import annotations

import dataclasses
import itertools
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import anyio.to_thread

from .._base.label import Label
from .._base.record import FIELDS, EvalRecord
from .._runtime import runtime
from . import _rollup, _textsearch
from ._base import BaseStore, RecordFilter, Store, iter_records
from ._jsonl import JsonlStore
from ._metadata import meta_sql as _meta_sql
from ._metadata import meta_text
from ._postgres import PostgresStore
from ._postgres import _record as pg_record
from ._rollup_read import ROLLED_STATUS, parts
from ._search import (
    SearchError,
    postgres_condition,
    search_words,
    sqlite_condition,
)
from ._search import matches as text_matches
from ._sqlite import TABLE, SQLiteStore, _ts
from ._sqlite import _record as sqlite_record
from ._textsearch import index_text

#: what a page of records may be sorted by, and the column each names
SORTS = {"time": "created_at", "score": "score", "latency": "latency_ms", "cost": "cost_usd",
         "run_latency": "run_latency_ms", "run_cost": "run_cost_usd"}
Sort = Literal["time", "score", "latency", "cost", "run_latency", "run_cost"]


_UNINDEXED = re.compile(r"(?<![\w.+])(agent_id|team_id|evaluator|status|run_id|evaluator_version|session_id|scope|"
                        r"user_id)(?= (?:=|IN) )")


@dataclass(frozen=True, slots=True)
class Browse:
    """Which records a page shows: `where` (the `Store.query` filter) and what people also filter
    by. ``judged``: verdicts only (passed or failed), never a `consistency` re-judgement;
    ``borderline``: numeric scores within this many points of their threshold; ``routed``: verdicts
    routed to review."""

    where: RecordFilter = field(default_factory=RecordFilter)
    version: str | None = None
    session_id: str | None = None
    scope: str | None = None
    judged: bool = False
    borderline: float | None = None
    user_id: str | None = None
    #: (key, value) pairs the record's metadata must hold (values compared as `meta_text` writes them)
    metadata: tuple[tuple[str, str], ...] = ()
    #: words every record must hold in its input, output or reason (`stores._search`)
    text: str | None = None
    #: only live verdicts routed to review (`EvalRecord.review_reason`)
    routed: bool = False
    #: SQL stores only: the records past the rollup's reach (`stores._rollup`: SQLite's rowid,
    #: PostgreSQL's transaction id)
    unfolded: int | None = None
    #: SQL stores only: a short stretch of time (a part of an hour, `parts`), read through the time
    #: index: SQLite, with no statistics of how many records each value has, would walk a whole
    #: evaluator's records instead
    by_time: bool = False

    def __post_init__(self) -> None:
        if self.text is not None:
            search_words(self.text)  # SearchError now, not in the middle of a query
        for key, _ in self.metadata:
            if not key or '"' in key or "\\" in key:
                raise ValueError(f"a metadata key is non-empty and holds no '\"' or '\\\\', got {key[:40]!r}")

    def matches(self, record: EvalRecord) -> bool:
        return (self.where.matches(record)
                and (self.user_id is None or record.user_id == self.user_id)
                and all(meta_text(record.metadata.get(k)) == v for k, v in self.metadata)
                and (self.text is None or text_matches(record, search_words(self.text)))
                and (self.version is None or record.evaluator_version == self.version)
                and (self.session_id is None or record.session_id == self.session_id)
                and (self.scope is None or record.scope == self.scope)
                and (not self.routed or record.review_reason is not None)
                and (not self.judged or (record.status in ("passed", "failed") and record.rejudge_of is None))
                and (self.borderline is None or (record.mode == "numeric" and record.score is not None
                                                 and record.threshold is not None
                                                 and abs(record.score - record.threshold) <= self.borderline)))

    def sql(self, mark: str, ts: Callable[[datetime], Any]) -> tuple[str, list[Any]]:
        condition, args = self.where.sql(mark, ts)
        where = [condition] if condition else []
        for column, value in (("evaluator_version", self.version), ("session_id", self.session_id),
                              ("scope", self.scope), ("user_id", self.user_id)):
            if value is not None:
                where.append(f"{column} = {mark}")
                args.append(value)
        if self.judged:
            where.append("status IN ('passed', 'failed') AND rejudge_of IS NULL")
        if self.routed:
            where.append("review_reason IS NOT NULL")
        if self.unfolded is not None:
            where.append("rowid > ?" if mark == "?" else "txid >= %s")
            args.append(self.unfolded)
        if self.by_time and mark == "?":  # SQLite's unary + keeps a column's index out of the plan
            where = [_UNINDEXED.sub(r"+\1", part) for part in where]
        if self.borderline is not None:
            where.append(f"mode = 'numeric' AND score IS NOT NULL AND threshold IS NOT NULL "
                         f"AND ABS(score - threshold) <= {mark}")
            args.append(self.borderline)
        for key, value in self.metadata:
            expression, bound = _meta_sql(mark, key)
            where.append(f"{expression} = {mark}")
            args += [*bound, value]
        if self.text is not None:
            condition, bound = (postgres_condition(self.text) if mark == "%s"
                                else sqlite_condition(search_words(self.text)))
            where.append(condition)
            args += bound
        return " AND ".join(where), args

    def replace(self, **changes: Any) -> Browse:
        return dataclasses.replace(self, **changes)


@dataclass
class Tally:
    """Counts of one group of records: by status, with latency and cost sums and the time span."""

    key: tuple[Any, ...]
    n: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    latency_ms: float = 0.0
    timed: int = 0
    cost_usd: float = 0.0
    first: datetime | None = None
    last: datetime | None = None
    names: tuple[str | None, str | None] = (None, None)  # the agent's and the team's newest names

    def merge(self, other: Tally) -> None:
        """Add `other`'s counts (the same group, counted from another part of the range)."""
        for name in ("n", "passed", "failed", "error", "skipped", "latency_ms", "timed", "cost_usd"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.first = min((t for t in (self.first, other.first) if t is not None), default=None)
        self.last = max((t for t in (self.last, other.last) if t is not None), default=None)

    def add(self, record: EvalRecord) -> None:
        self.n += 1
        setattr(self, record.status, getattr(self, record.status) + 1)
        if record.latency_ms is not None:
            self.latency_ms += record.latency_ms
            self.timed += 1
        self.cost_usd += record.cost_usd or 0.0
        self.first = record.created_at if self.first is None else min(self.first, record.created_at)
        self.last = record.created_at if self.last is None else max(self.last, record.created_at)


#: the tallies' grouping: who ran, what graded it, which version of it
GROUPS = ("evaluator", "evaluator_version", "agent_id", "team_id")  # the graded index's order (`_indexes`)
_COUNTS = "COUNT(*), " + ", ".join(f"SUM(CASE WHEN status = '{status}' THEN 1 ELSE 0 END)"
                                   for status in ("passed", "failed", "error", "skipped"))


class Snapshot(BaseStore):
    """A store's records, read once, newest first, for one page to ask as often as it needs; its
    labels read and written in the store itself."""

    def __init__(self, store: BaseStore, records: list[EvalRecord]) -> None:
        self.store = store
        self.records = records
        self._by_id = {r.id: r for r in records}

    def __repr__(self) -> str:
        return repr(self.store)

    async def write(self, records: Sequence[EvalRecord]) -> None:
        raise NotImplementedError("a page's snapshot of a store is read-only")

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        return list(itertools.islice((r for r in self.records if where.matches(r)), limit))  # newest first already

    async def _iter_records(self, where: RecordFilter, page_size: int) -> AsyncIterator[EvalRecord]:
        for record in self.records:
            if where.matches(record):
                yield record

    async def records_by_id(self, ids: Collection[str]) -> list[EvalRecord]:
        return [self._by_id[i] for i in set(ids) if i in self._by_id]

    async def read_labels(self) -> list[Label]:
        return await self.store.read_labels()

    async def write_labels(self, labels: Sequence[Label]) -> None:
        await self.store.write_labels(labels)


async def for_page(store: Store) -> Store:
    """The store one page asks: a JSONL store's records read once into a `Snapshot` (each of its
    queries reads the whole file), any other store as it is."""
    if isinstance(store, JsonlStore):
        return Snapshot(store, await store.query(limit=None))
    return store


async def page(store: Store, browse: Browse, *, offset: int = 0, limit: int = 50, sort: Sort = "time",
               ascending: bool = False) -> list[EvalRecord]:
    """`limit` records `browse` matches after the first `offset`, newest first, or by `sort`
    (`SORTS`): highest first unless `ascending`, records without the value last, ties newest first."""
    if sort not in SORTS:
        raise ValueError(f"sort is one of {', '.join(SORTS)}, got {sort!r:.40}")
    sql = _sql(store)
    if sql is not None:
        run, mark, ts, table, from_row = sql
        if browse.text is not None:
            await index_text(store)
        if browse.text is not None and isinstance(store, SQLiteStore) and sort == "time" and not ascending:
            newest = await anyio.to_thread.run_sync(
                store._locked, lambda conn: _textsearch.common_words(conn, browse, offset, limit))
            if newest is not None:
                return [from_row(row) for row in newest]
        condition, args = browse.sql(mark, ts)
        tie = "rowid" if mark == "?" else "id"  # SQLite: the created_at index holds rowid
        way = "ASC" if ascending else "DESC"
        order = (f"created_at {way}, {tie} {way}" if sort == "time" else
                 f"{SORTS[sort]} IS NULL, {SORTS[sort]} {way}, created_at DESC, {tie} DESC")
        query = (f"SELECT {', '.join(FIELDS)} FROM {table}" + (f" WHERE {condition}" if condition else "")
                 + f" ORDER BY {order} LIMIT {int(limit)} OFFSET {int(offset)}")
        if browse.text is not None and isinstance(store, PostgresStore) and sort == "time":
            # Words in few records: listed through the indexes as bitmaps, then ordered (the planner would
            # walk the time index testing every row: 20 s for one match in a million). Many: the planner's
            # choice, the newest records or the text index's list joined with the filters' (exact with the
            # store's work_mem, `PostgresStore._configure`).
            text, bound = postgres_condition(browse.text)
            matches = await _textsearch.bitmaps(store, f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE {text} "
                                            f"LIMIT {_textsearch.PG_RARE}) m", bound)
            if matches[0][0] < _textsearch.PG_RARE:
                return [from_row(row) for row in await _textsearch.bitmaps(
                    store, f"SELECT {', '.join(FIELDS)} FROM {table} WHERE {condition} ORDER BY {order} "
                    f"LIMIT {int(limit)} OFFSET {int(offset)}", args)]
        if sort != "time":  # ordered by a figure: found in the graded index alone (`_indexes`), then read
            query = (f"SELECT {', '.join(FIELDS)} FROM {table} WHERE {tie} IN (SELECT {tie} FROM {table}"
                     + (f" WHERE {condition}" if condition else "")
                     + f" ORDER BY {order} LIMIT {int(limit)} OFFSET {int(offset)}) ORDER BY {order}")
        try:
            rows = await run(query, args)
        except sqlite3.OperationalError as exc:  # FTS5 refusing a search is the search's fault, said as such
            if browse.text is None or "fts5" not in str(exc):
                raise
            raise SearchError(f"q could not be searched: {exc}") from None
        return [from_row(row) for row in rows]
    if sort != "time" or ascending:  # every match, then ordered: stores without SQL are small
        everything = [r async for r in _records(store, browse)]
        if sort == "time":
            return everything[::-1][offset:offset + limit]
        column = SORTS[sort]
        valued = sorted((r for r in everything if getattr(r, column) is not None), key=lambda r: getattr(r, column),
                        reverse=not ascending)  # a stable sort: ties stay newest first
        return [*valued, *(r for r in everything if getattr(r, column) is None)][offset:offset + limit]
    found: list[EvalRecord] = []
    async for record in iter_records(store, **browse.where.keywords()):
        if browse.matches(record):
            if offset:
                offset -= 1
                continue
            found.append(record)
            if len(found) >= limit:
                break
    return found


async def tallies(store: Store, browse: Browse) -> list[Tally]:
    """One `Tally` per agent or team, evaluator and version (`GROUPS`), re-judgements left out."""
    sql = _sql(store)
    if sql is None:
        groups: dict[tuple[Any, ...], Tally] = {}
        named: dict[tuple[str, str], tuple[datetime, str]] = {}
        async for record in _records(store, browse):
            if record.rejudge_of is None:
                key = tuple(getattr(record, name) for name in GROUPS)
                groups.setdefault(key, Tally(key)).add(record)
                for column, name in (("agent_id", record.agent_name), ("team_id", record.team_name)):
                    value, seen = getattr(record, column), named.get((column, getattr(record, column)))
                    if value is not None and name is not None and (seen is None or record.created_at > seen[0]):
                        named[(column, value)] = (record.created_at, name)
        for t in groups.values():
            agent, team = named.get(("agent_id", t.key[2])), named.get(("team_id", t.key[3]))
            t.names = (agent[1] if agent else None, team[1] if team else None)
        return list(groups.values())
    run, mark, ts, table, _ = sql
    if browse.text is not None:
        await index_text(store)
    condition, args = browse.sql(mark, ts)
    where = f"WHERE {condition + ' AND ' if condition else ''}rejudge_of IS NULL"
    counted: dict[tuple[Any, ...], Tally] = {}
    for part, rolled in await parts(store, browse):
        if rolled is not None:  # whole hours: the rollup's sums
            condition, bound = _rollup.where(part, rolled, mark)
            query = (f"SELECT evaluator, version, agent, team, SUM(n), {ROLLED_STATUS}, SUM(latency), SUM(timed), "
                     f"SUM(cost), MIN(first_at), MAX(last_at) FROM {_rollup.rollup_table(table)} WHERE {condition} "
                     "AND rejudge = 0 GROUP BY 1, 2, 3, 4")
        else:
            condition, bound = part.sql(mark, ts)
            query = (f"SELECT {', '.join(GROUPS)}, {_COUNTS}, SUM(latency_ms), COUNT(latency_ms), SUM(cost_usd), "
                     f"MIN(created_at), MAX(created_at) FROM {table} WHERE {condition + ' AND ' if condition else ''}"
                     f"rejudge_of IS NULL GROUP BY {', '.join(GROUPS)}")
        for row in await run(query, bound):
            n, passed, failed, error, skipped, latency, timed, cost, first, last = row[4:]
            key = (row[0], *(_rollup.unkey(v) for v in row[1:4])) if rolled is not None else tuple(row[:4])
            tally = Tally(key, n=int(n), passed=int(passed or 0), failed=int(failed or 0),
                          error=int(error or 0), skipped=int(skipped or 0), latency_ms=float(latency or 0),
                          timed=int(timed or 0), cost_usd=float(cost or 0), first=_moment(first), last=_moment(last))
            if tally.key in counted:
                counted[tally.key].merge(tally)
            else:
                counted[tally.key] = tally
    found = list(counted.values())
    # The names, apart: the newest of each agent and team, found walking its index back from the newest
    # record, rather than two more columns read from every row.
    names: dict[tuple[str, str], str | None] = {}
    for column, name in (("agent_id", "agent_name"), ("team_id", "team_name")):
        for value in {t.key[GROUPS.index(column)] for t in found} - {None}:
            newest = await run(f"SELECT {name} FROM {table} {where} AND {column} = {mark} AND {name} IS NOT NULL "
                               f"ORDER BY created_at DESC LIMIT 1", [*args, value])
            names[(column, value)] = newest[0][0] if newest else None
    for t in found:
        t.names = (names.get(("agent_id", t.key[2])), names.get(("team_id", t.key[3])))
    return found


async def verdict_counts(store: Store, browse: Browse) -> dict[tuple[str, str | None], tuple[int, int]]:
    """(verdicts, passed) per evaluator and version, re-judgements left out: what calibration needs of
    `tallies`, in one narrow query (grouped in the order of the store's index, read from it alone)."""
    browse = browse.replace(judged=True)
    sql = _sql(store)
    counts: dict[tuple[str, str | None], tuple[int, int]] = {}
    if sql is None:
        async for record in _records(store, browse):
            n, passed = counts.get((record.evaluator, record.evaluator_version), (0, 0))
            counts[(record.evaluator, record.evaluator_version)] = (n + 1, passed + (record.status == "passed"))
        return counts
    run, mark, ts, table, _ = sql
    for part, rolled in await parts(store, browse):
        if rolled is not None:
            condition, args = _rollup.where(part, rolled, mark)
            query = (f"SELECT evaluator, version, SUM(n), SUM(CASE WHEN status = 'passed' THEN n ELSE 0 END) "
                     f"FROM {_rollup.rollup_table(table)} WHERE {condition} GROUP BY 1, 2")
        else:
            condition, args = part.sql(mark, ts)
            query = (f"SELECT evaluator, evaluator_version, COUNT(*), SUM(CASE WHEN status = 'passed' THEN 1 ELSE 0 "
                     f"END) FROM {table} WHERE {condition} GROUP BY 1, 2")
        for evaluator, version, n, passed in await run(query, args):
            key = (evaluator, _rollup.unkey(version) if rolled is not None else version)
            had = counts.get(key, (0, 0))
            counts[key] = (had[0] + int(n), had[1] + int(passed or 0))
    return counts


async def _records(store: Store, browse: Browse) -> Any:
    async for record in iter_records(store, **browse.where.keywords()):
        if browse.matches(record):
            yield record


def _moment(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


_Run = Callable[[str, list[Any]], Any]


def _sql(store: Store) -> tuple[_Run, str, Callable[[datetime], Any], str, Callable[[Any], EvalRecord]] | None:
    """How to ask `store` in SQL (run, placeholder, time form, table, row to record), or None when
    it is not a SQL store."""
    if isinstance(store, SQLiteStore):
        async def run_sqlite(query: str, args: list[Any]) -> list[Any]:
            rows = await anyio.to_thread.run_sync(store._locked, lambda conn: conn.execute(query, args).fetchall())
            return list(rows)

        return run_sqlite, "?", _ts, TABLE, sqlite_record
    if isinstance(store, PostgresStore):
        async def run_postgres(query: str, args: list[Any]) -> list[Any]:
            return await runtime.on_loop(store._fetch, query, args)

        return run_postgres, "%s", lambda moment: moment, store.table, pg_record
    return None
