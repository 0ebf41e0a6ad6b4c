"""The Store protocol and the retry policy every write goes through."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import anyio

from .._base.log import log
from .._base.record import EvalRecord
from ..exceptions import StoreError


@runtime_checkable
class Store(Protocol):
    """Batch writes and filtered reads of EvalRecords. Writes are idempotent on ``record.id``;
    ``query`` returns the newest first (``since`` inclusive, ``until`` exclusive).

    A store may also offer ``iter_records(page_size=..., **filters)`` (an async iterator, newest
    first) when it can stream more cheaply than `iter_records` below pages through ``query``."""

    async def write(self, records: Sequence[EvalRecord]) -> None: ...

    async def query(self, *, agent_id: str | None = None, team_id: str | None = None,
                    evaluator: str | None = None, status: str | None = None, run_id: str | None = None,
                    since: datetime | None = None, until: datetime | None = None,
                    limit: int | None = 1000) -> list[EvalRecord]: ...

    async def aclose(self) -> None: ...


async def write_with_retry(store: Store, records: Sequence[EvalRecord], *, attempts: int = 4,
                           backoff: float = 0.05) -> None:
    """Write, retrying transient failures with jittered exponential backoff; then raise StoreError.

    Every failed attempt is logged; the final failure carries the record ids so nothing vanishes
    without a trace.
    """
    for attempt in range(1, attempts + 1):
        try:
            await store.write(records)
            return
        except Exception as exc:
            last = exc
            log.warning("store_write_retry", store=type(store).__name__, attempt=attempt, attempts=attempts,
                        error_type=type(exc).__name__, error=str(exc), records=len(records))
            if attempt < attempts:
                await anyio.sleep(backoff * (2 ** (attempt - 1)) * (0.5 + random.random()))
    log.error("store_write_failed", store=type(store).__name__, error_type=type(last).__name__, error=str(last),
              record_ids=[r.id for r in records], records=[r.model_dump(mode="json") for r in records])
    raise StoreError(f"{type(store).__name__} could not write {len(records)} record(s) after {attempts} "
                     f"attempts: {type(last).__name__}: {last}") from last


def matches(record: EvalRecord, *, agent_id: str | None, team_id: str | None, evaluator: str | None,
            status: str | None, run_id: str | None, since: datetime | None, until: datetime | None) -> bool:
    """The query filter, for stores that filter in Python."""
    return ((agent_id is None or record.agent_id == agent_id)
            and (team_id is None or record.team_id == team_id)
            and (evaluator is None or record.evaluator == evaluator)
            and (status is None or record.status == status)
            and (run_id is None or record.run_id == run_id)
            and (since is None or record.created_at >= since)
            and (until is None or record.created_at < until))



def select(records: Iterable[EvalRecord], *, limit: int | None = 1000, **filters: Any) -> list[EvalRecord]:
    """The query over records in memory: filtered, newest first, at most `limit`."""
    found = [r for r in records if matches(r, **filters)]
    found.sort(key=lambda r: r.created_at, reverse=True)
    return found if limit is None else found[:limit]


def select_sql(table: str, columns: Sequence[str], mark: str, ts: Callable[[datetime], Any], *,
               agent_id: str | None = None, team_id: str | None = None, evaluator: str | None = None,
               status: str | None = None, run_id: str | None = None, since: datetime | None = None,
               until: datetime | None = None, limit: int | None = 1000) -> tuple[str, list[Any]]:
    """The query filter as SQL (newest first) for stores that filter in the database; `mark` is the
    driver's placeholder and `ts` converts a datetime to the stored form."""
    where, args = [], []
    for column, value in (("agent_id", agent_id), ("team_id", team_id), ("evaluator", evaluator),
                          ("status", status), ("run_id", run_id)):
        if value is not None:
            where.append(f"{column} = {mark}")
            args.append(value)
    if since is not None:
        where.append(f"created_at >= {mark}")
        args.append(ts(since))
    if until is not None:
        where.append(f"created_at < {mark}")
        args.append(ts(until))
    sql = f"SELECT {', '.join(columns)} FROM {table}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY created_at DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, args


async def iter_records(store: Store, *, page_size: int = 1000, **filters: Any) -> AsyncIterator[EvalRecord]:
    """Every record matching ``filters`` (query's keywords), newest first, ``page_size`` at a time,
    so a report over a large store never holds more than a page.

    Uses the store's own ``iter_records`` if it has one; otherwise pages through ``query`` by
    ``created_at``, re-reading the oldest timestamp of each page so ties are neither lost nor repeated.
    """
    own = getattr(store, "iter_records", None)
    if own is not None:
        async for record in own(page_size=page_size, **filters):
            yield record
        return
    until, size = filters.pop("until", None), page_size
    boundary: datetime | None = None
    seen: set[str] = set()  # ids already yielded at the boundary timestamp
    while True:
        page = await store.query(**filters, until=until, limit=size)
        fresh = [r for r in page if r.id not in seen]
        for record in fresh:
            yield record
        if len(page) < size:
            return
        if not fresh:  # a whole page of one timestamp, all seen: read a bigger page
            size *= 2
            continue
        oldest = page[-1].created_at
        at_oldest = {r.id for r in page if r.created_at == oldest}
        seen = seen | at_oldest if oldest == boundary else at_oldest
        boundary, until, size = oldest, oldest + timedelta(microseconds=1), page_size
