"""Reading a store for people browsing it (the `judgehooks ui` pages): a page of records under more
filters than `Store.query` takes, and tallies per agent, evaluator and version or per time bucket.
SQLite and PostgreSQL compute them in the database (one indexed query each, so a page stays fast on
a large store); any other store gets the same answer from one pass over its records. A page asks a
JSONL store through `for_page`: its file read once for the page, however many questions it asks."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import anyio.to_thread

from .._base.label import Label
from .._base.record import FIELDS, EvalRecord
from .._runtime import runtime
from ._base import BaseStore, RecordFilter, Store, iter_records
from ._jsonl import JsonlStore
from ._postgres import PostgresStore
from ._postgres import _record as pg_record
from ._sqlite import TABLE, SQLiteStore, _ts
from ._sqlite import _record as sqlite_record

Bucket = Literal["hour", "day"]
#: how a bucket is cut from the ISO time text, in both SQL dialects: its first characters
_CUT = {"hour": 13, "day": 10}
_PG_FORMAT = {"hour": 'YYYY-MM-DD"T"HH24', "day": "YYYY-MM-DD"}


@dataclass(frozen=True, slots=True)
class Browse:
    """Which records a page shows: `where` (the `Store.query` filter) and what people also filter
    by. ``judged``: verdicts only (passed or failed), never a `consistency` re-judgement;
    ``borderline``: numeric scores within this many points of their threshold."""

    where: RecordFilter = field(default_factory=RecordFilter)
    version: str | None = None
    session_id: str | None = None
    scope: str | None = None
    judged: bool = False
    borderline: float | None = None

    def matches(self, record: EvalRecord) -> bool:
        return (self.where.matches(record)
                and (self.version is None or record.evaluator_version == self.version)
                and (self.session_id is None or record.session_id == self.session_id)
                and (self.scope is None or record.scope == self.scope)
                and (not self.judged or (record.status in ("passed", "failed") and record.rejudge_of is None))
                and (self.borderline is None or (record.mode == "numeric" and record.score is not None
                                                 and record.threshold is not None
                                                 and abs(record.score - record.threshold) <= self.borderline)))

    def sql(self, mark: str, ts: Callable[[datetime], Any]) -> tuple[str, list[Any]]:
        condition, args = self.where.sql(mark, ts)
        where = [condition] if condition else []
        for column, value in (("evaluator_version", self.version), ("session_id", self.session_id),
                              ("scope", self.scope)):
            if value is not None:
                where.append(f"{column} = {mark}")
                args.append(value)
        if self.judged:
            where.append("status IN ('passed', 'failed') AND rejudge_of IS NULL")
        if self.borderline is not None:
            where.append(f"mode = 'numeric' AND score IS NOT NULL AND threshold IS NOT NULL "
                         f"AND ABS(score - threshold) <= {mark}")
            args.append(self.borderline)
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
GROUPS = ("evaluator", "evaluator_version", "agent_id", "team_id")  # SQLite's overview index's order
_COUNTS = ("COUNT(*), SUM(CASE WHEN status = 'passed' THEN 1 ELSE 0 END), "
           "SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END), "
           "SUM(CASE WHEN status = 'skipped' THEN 1 ELSE 0 END)")


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


async def page(store: Store, browse: Browse, *, offset: int = 0, limit: int = 50) -> list[EvalRecord]:
    """`limit` records `browse` matches after the first `offset`, newest first."""
    sql = _sql(store)
    if sql is not None:
        run, mark, ts, table, from_row = sql
        condition, args = browse.sql(mark, ts)
        query = (f"SELECT {', '.join(FIELDS)} FROM {table}" + (f" WHERE {condition}" if condition else "")
                 + f" ORDER BY created_at DESC, {'rowid' if mark == '?' else 'id'} DESC"
                 f" LIMIT {int(limit)} OFFSET {int(offset)}")  # SQLite: the created_at index holds rowid
        return [from_row(row) for row in await run(query, args)]
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
    condition, args = browse.sql(mark, ts)
    where = f"WHERE {condition + ' AND ' if condition else ''}rejudge_of IS NULL"
    query = (f"SELECT {', '.join(GROUPS)}, {_COUNTS}, SUM(latency_ms), COUNT(latency_ms), SUM(cost_usd), "
             f"MIN(created_at), MAX(created_at) FROM {table} {where} GROUP BY {', '.join(GROUPS)}")
    found = []
    for row in await run(query, args):
        key, (n, passed, failed, error, skipped, latency, timed, cost, first, last) = row[:4], row[4:]
        found.append(Tally(tuple(key), n=n, passed=passed or 0, failed=failed or 0, error=error or 0,
                           skipped=skipped or 0, latency_ms=float(latency or 0), timed=timed or 0,
                           cost_usd=float(cost or 0), first=_moment(first), last=_moment(last)))
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


async def pass_rates(store: Store, browse: Browse, bucket: Bucket) -> list[tuple[str, str | None, datetime, int, int]]:
    """(evaluator, version, bucket start, verdicts, passed) per `bucket` of time, verdicts only."""
    browse = browse.replace(judged=True)
    sql = _sql(store)
    if sql is None:
        counts: dict[tuple[str, str | None, str], list[int]] = {}
        async for record in _records(store, browse):
            cut = record.created_at.astimezone(UTC).isoformat()[:_CUT[bucket]]
            entry = counts.setdefault((record.evaluator, record.evaluator_version, cut), [0, 0])
            entry[0] += 1
            entry[1] += record.status == "passed"
        rows: Sequence[Sequence[Any]] = [(*key, n, ok) for key, (n, ok) in counts.items()]
    else:
        run, mark, ts, table, _ = sql
        condition, args = browse.sql(mark, ts)
        cut = (f"to_char(created_at AT TIME ZONE 'UTC', '{_PG_FORMAT[bucket]}')" if mark == "%s"
               else f"substr(created_at, 1, {_CUT[bucket]})")
        rows = await run(f"SELECT evaluator, evaluator_version, {cut}, COUNT(*), "
                         f"SUM(CASE WHEN status = 'passed' THEN 1 ELSE 0 END) FROM {table} WHERE {condition} "
                         "GROUP BY 1, 2, 3", args)
    hour = "T00" if bucket == "day" else ""
    return sorted((str(e), v, datetime.fromisoformat(f"{cut}{hour}:00:00+00:00"), int(n), int(ok or 0))
                  for e, v, cut, n, ok in rows)


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
