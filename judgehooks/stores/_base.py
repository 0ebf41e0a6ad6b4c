"""The Store seam: the `Store` protocol, `BaseStore` (the optional methods declared, with no-op
defaults), `RecordFilter` (the query keywords as one value), the retry policy every write goes
through, and the one JSON fallback every store serialises with (`record_json`, `jsonable`)."""

from __future__ import annotations

import dataclasses
import random
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import anyio

from .._base.feedback import Feedback
from .._base.jsondata import record_data
from .._base.label import Label
from .._base.log import log
from .._base.record import EvalRecord
from .._base.when import as_moment
from ..exceptions import StoreError

_REFUSALS = frozenset({"DataError", "IntegrityError", "NotSupportedError"})


def refused(exc: BaseException | None) -> bool:
    """Whether a failed write means the store refuses this record for good (a value it cannot hold,
    e.g. an integer past its column's range) rather than being unreachable; follows ``__cause__``."""
    while exc is not None:
        if isinstance(exc, (ValueError, TypeError, ArithmeticError, LookupError)) \
                or any(c.__name__ in _REFUSALS for c in type(exc).__mro__):
            return True
        exc = exc.__cause__
    return False


def unstorable(record: EvalRecord, exc: BaseException) -> EvalRecord:
    """The `error` record that stands for one the store refused: the same id and run, without the
    verdict, counts, metadata and details (one of which the store could not hold), saying why."""
    verdict = record.status if record.score is None else f"{record.status}, score {record.score:g}"
    why = f"{type(exc).__name__}: {exc}"
    return EvalRecord(
        id=record.id, created_at=record.created_at, status="error", evaluator=record.evaluator,
        evaluator_version=record.evaluator_version, mode=record.mode,
        agent_id=record.agent_id, agent_name=record.agent_name, team_id=record.team_id, team_name=record.team_name,
        run_id=record.run_id, session_id=record.session_id, user_id=record.user_id, input=record.input,
        output=record.output, judge_model=record.judge_model, sample_rate=record.sample_rate,
        error_type="StoreError",
        error_message=(f"the store refused this record ({why[:500]}); stored without its verdict ({verdict}), "
                       "token counts, cost, metadata and details"))


_WHO = ("evaluator", "agent_id", "team_id", "run_id", "session_id", "user_id")


def read_row(data: Mapping[str, Any], build: Callable[[Mapping[str, Any]], EvalRecord]) -> EvalRecord:
    """``build(data)``: a stored row as its record; or, when the row does not read back as one (a
    database anyone may write: a status no record has, metadata that is not JSON, bytes that are not
    UTF-8...), an `error` record standing for it, with its id, time and names where those read, saying
    why. One bad row neither sinks every query that meets it nor vanishes from them."""
    try:
        return build(data)
    except (ValueError, TypeError, RecursionError) as exc:
        return unreadable(data, exc)


def unreadable(data: Mapping[str, Any], exc: BaseException) -> EvalRecord:
    """The `error` record standing for a stored row that does not read back (see `read_row`)."""
    why = f"{type(exc).__name__}: {exc}"
    at = data.get("created_at")
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at)
        except ValueError:
            at = None
    kept = {k: v for k in _WHO if isinstance(v := data.get(k), str)}
    record_id = data.get("id")
    log.warning("store_row_unreadable", record_id=str(record_id)[:200], reason=why[:300])
    return EvalRecord.model_validate({
        "evaluator": "unknown", **kept, "status": "error", "mode": "binary",
        "id": record_id if isinstance(record_id, str) else str(record_id)[:200],
        "created_at": at if isinstance(at, datetime) and at.tzinfo else datetime(1970, 1, 1, tzinfo=UTC),
        "error_type": "StoreError",
        "error_message": f"this stored row does not read back as a record ({why[:500]}); shown as an error"})


@runtime_checkable
class Store(Protocol):
    """Batch writes and filtered reads of EvalRecords. Writes are idempotent on ``record.id``;
    ``query`` returns the newest first (``since`` inclusive, ``until`` exclusive).

    Subclass `BaseStore` rather than implementing this from scratch: it gives ``query`` and
    ``iter_records`` from one ``_query(where, limit)`` and no-op ``aclose`` / ``stats``."""

    async def write(self, records: Sequence[EvalRecord]) -> None: ...

    async def query(self, *, agent_id: str | None = None, team_id: str | None = None,
                    evaluator: str | None = None, status: str | None = None, run_id: str | None = None,
                    since: datetime | str | None = None, until: datetime | str | None = None,
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
              record_ids=[r.id for r in records], records=[record_data(r) for r in records])
    raise StoreError(f"{type(store).__name__} could not write {len(records)} record(s) after {attempts} "
                     f"attempts: {type(last).__name__}: {last}") from last


async def write_salvaging(store: Store, records: Sequence[EvalRecord]) -> tuple[list[EvalRecord], StoreError | None]:
    """`write_with_retry`, and when the batch fails, one record at a time, so one bad record never
    sinks the others. A record the store refuses as bad data, or fails while it takes the records
    around it, is replaced by its `unstorable` error record (the original goes to the log).

    Returns the records stored (a replacement in place of its original) and, for the records that
    were not (the store is down), the StoreError, its ``records`` the originals left."""
    try:
        await write_with_retry(store, records)
        return list(records), None
    except StoreError as exc:
        error = exc
    stored: list[EvalRecord] = []
    bad: list[tuple[EvalRecord, BaseException]] = []
    if len(records) == 1:
        cause = error.__cause__ or error
        bad = [(records[0], cause)] if refused(cause) else []
    else:
        for record in records:
            try:
                await store.write([record])
                stored.append(record)
            except Exception as exc:
                if not stored and not refused(exc):
                    break  # the store is down, not picky: the rest stay unwritten
                why: BaseException = exc
                if not refused(exc):  # it took others: a blip, or this record? Retried before it is blamed
                    try:
                        await write_with_retry(store, [record])
                        stored.append(record)
                        continue
                    except StoreError as again:
                        why = again.__cause__ or again
                bad.append((record, why))
    if bad:
        log.error("store_refused_records", store=type(store).__name__, record_ids=[r.id for r, _ in bad],
                  errors=[f"{type(e).__name__}: {e}" for _, e in bad],
                  records=[record_data(r) for r, _ in bad])
        replacements = [unstorable(record, exc) for record, exc in bad]
        try:
            await write_with_retry(store, replacements)
            stored += replacements
        except StoreError as exc:
            error = exc
    done = {r.id for r in stored}
    left = [r for r in records if r.id not in done]
    if not left:
        return stored, None
    error.records = left
    return stored, error


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Which records a query wants: every field that is not None must match (``since`` inclusive,
    ``until`` exclusive; each a datetime, or text as the command line takes it: ``"24h"``, ``"7d"``,
    an ISO time). The keywords of `Store.query`, as one value."""

    agent_id: str | None = None
    team_id: str | None = None
    evaluator: str | None = None
    status: str | None = None
    run_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        # `since="24h"` as on the command line; text is read once, here, for every store
        object.__setattr__(self, "since", as_moment("since", self.since))
        object.__setattr__(self, "until", as_moment("until", self.until))

    def matches(self, record: EvalRecord) -> bool:
        """The filter, for stores that filter in Python."""
        return ((self.agent_id is None or record.agent_id == self.agent_id)
                and (self.team_id is None or record.team_id == self.team_id)
                and (self.evaluator is None or record.evaluator == self.evaluator)
                and (self.status is None or record.status == self.status)
                and (self.run_id is None or record.run_id == self.run_id)
                and (self.since is None or record.created_at >= self.since)
                and (self.until is None or record.created_at < self.until))

    def sql(self, mark: str, ts: Callable[[datetime], Any]) -> tuple[str, list[Any]]:
        """The filter as a SQL condition (``"agent_id = ? AND ..."``, or ``""`` when it takes every
        record) and its arguments; `mark` is the driver's placeholder and `ts` converts a datetime to
        the stored form."""
        where, args = [], []
        for column in ("agent_id", "team_id", "evaluator", "status", "run_id"):
            value = getattr(self, column)
            if value is not None:
                where.append(f"{column} = {mark}")
                args.append(value)
        if self.since is not None:
            where.append(f"created_at >= {mark}")
            args.append(ts(self.since))
        if self.until is not None:
            where.append(f"created_at < {mark}")
            args.append(ts(self.until))
        return " AND ".join(where), args

    def select(self, records: Iterable[EvalRecord], limit: int | None = 1000) -> list[EvalRecord]:
        """The query over records in memory: filtered, newest first, at most `limit`."""
        found = [r for r in records if self.matches(r)]
        found.sort(key=lambda r: r.created_at, reverse=True)
        return found if limit is None else found[:limit]

    def select_sql(self, table: str, columns: Sequence[str], mark: str, ts: Callable[[datetime], Any],
                   limit: int | None = 1000) -> tuple[str, list[Any]]:
        """The whole query as SQL (newest first, at most `limit`) for stores that filter in the database."""
        condition, args = self.sql(mark, ts)
        sql = f"SELECT {', '.join(columns)} FROM {table}"
        if condition:
            sql += f" WHERE {condition}"
        sql += " ORDER BY created_at DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return sql, args

    def keywords(self) -> dict[str, Any]:
        """The filter as `Store.query` keywords: the ones it sets."""
        return {f.name: value for f in dataclasses.fields(self) if (value := getattr(self, f.name)) is not None}

    def replace(self, **changes: Any) -> RecordFilter:
        return dataclasses.replace(self, **changes)


def store_key(store: object) -> str:
    """Which store a spilled row or an outbox file belongs to, the same in every process: its repr,
    unless that is the default one with a memory address, then its class."""
    text = repr(store)
    return f"{type(store).__module__}.{type(store).__qualname__}" if " at 0x" in text else text


class BaseStore(ABC):
    """A `Store` with every optional method declared: subclass it, implement `write` and
    `_query(where, limit)`, and the public `query` / `iter_records` keywords come from here.

    ``aclose`` and ``stats`` do nothing unless a store has something to close or count.
    """

    @abstractmethod
    async def write(self, records: Sequence[EvalRecord]) -> None:
        """Store `records`, idempotent on ``record.id``. Raise when they could not be stored."""

    async def query(self, *, agent_id: str | None = None, team_id: str | None = None,
                    evaluator: str | None = None, status: str | None = None, run_id: str | None = None,
                    since: datetime | str | None = None, until: datetime | str | None = None,
                    limit: int | None = 1000) -> list[EvalRecord]:
        """The records matching every filter given, newest first, at most `limit` (None: all)."""
        where = RecordFilter(agent_id=agent_id, team_id=team_id, evaluator=evaluator, status=status,
                             run_id=run_id, since=as_moment("since", since), until=as_moment("until", until))
        return await self._query(where, limit)

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        """Override: the records `where` matches, newest first, at most `limit`."""
        raise NotImplementedError(f"{type(self).__name__} cannot be queried")

    def iter_records(self, *, page_size: int = 1000, **filters: Any) -> AsyncIterator[EvalRecord]:
        """Every record matching ``filters`` (query's keywords), newest first, ``page_size`` at a
        time, so a report over a large store never holds more than a page."""
        return self._iter_records(RecordFilter(**filters), page_size)

    def _iter_records(self, where: RecordFilter, page_size: int) -> AsyncIterator[EvalRecord]:
        """Override when the store can stream more cheaply than paging through `query`."""
        return pages(self, where, page_size)

    async def records_by_id(self, ids: Collection[str]) -> list[EvalRecord]:
        """The records with these ids (those stored; in no particular order). By default one pass
        over every record: stores that can look ids up override it."""
        wanted = set(ids)
        return [r async for r in iter_records(self) if r.id in wanted] if wanted else []

    async def write_labels(self, labels: Sequence[Label]) -> None:
        """Keep human labels beside the records, one per (record, reviewer): a later label from the
        same reviewer replaces the earlier one. A store that cannot keep labels raises NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} does not keep human labels: keep them in a SQLite, "
                                  "PostgreSQL, JSONL or memory store (the one your records are read from)")

    async def read_labels(self) -> list[Label]:
        """Every label kept, one per (record, reviewer)."""
        raise NotImplementedError(f"{type(self).__name__} does not keep human labels")

    async def write_feedback(self, items: Sequence[Feedback]) -> None:
        """Keep end users' feedback beside the records (apart from the labels), one per id: a named
        user's later feedback on a run replaces the earlier. A store that cannot keep it raises
        NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} does not keep user feedback: keep it in a SQLite, "
                                  "PostgreSQL, JSONL or memory store (the one your records are read from)")

    async def read_feedback(self, run_ids: Collection[str] | None = None) -> list[Feedback]:
        """The feedback on the runs `run_ids` (None: all), oldest first."""
        raise NotImplementedError(f"{type(self).__name__} does not keep user feedback")

    async def aclose(self) -> None:
        """Release connections and files; the next call opens them again."""
        return None

    def stats(self) -> dict[str, Any]:
        """Counters worth reporting (e.g. spilled records); empty when a store keeps none."""
        return {}


async def pages(store: Store, where: RecordFilter, page_size: int) -> AsyncIterator[EvalRecord]:
    """Page through ``store.query`` by ``created_at``, newest first, re-reading the oldest timestamp
    of each page so ties are neither lost nor repeated."""
    filters, until, size = where.replace(until=None).keywords(), where.until, page_size
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


async def iter_records(store: Store, *, page_size: int = 1000, **filters: Any) -> AsyncIterator[EvalRecord]:
    """Every record of `store` matching ``filters`` (query's keywords), newest first, ``page_size``
    at a time: `BaseStore.iter_records`, also for a store that only implements the `Store` protocol."""
    found = (store.iter_records(page_size=page_size, **filters) if isinstance(store, BaseStore)
             else pages(store, RecordFilter(**filters), page_size))
    async for record in found:
        yield record
