"""A store that goes away comes back whole: records it cannot take wait in a local SQLite file.

`SpillingStore` wraps any store. A write the store refuses is appended to the `eval_spill` table
of the outbox file (durable at once, so RAM use stays bounded however long the outage lasts),
and from then on new writes queue behind it, so records reach the store in the order they were
written. One task on the judgehooks loop re-delivers the oldest batch with capped backoff until
the store takes it. A record the store refuses for good (bad data, or failing while the records
around it go in) is tried `max_tries` times, then moved to the dead letters (`_deadletter`) and
stood for in the store by an `error` record, so it never blocks the records behind it. The rows
outlive the process: the next process (or `judgehooks resume`) with the same store re-delivers
them. Both the inline path and the background writer go through it, because it sits where they
meet: the pipeline's store.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.to_thread

from .._base.jsondata import record_json
from .._base.label import Label
from .._base.log import log
from .._base.record import EvalRecord
from .._base.sqlitefile import add_column, checked_path, connect_wal, immediate
from .._base.validate import check_number
from .._runtime import runtime
from . import _deadletter
from ._base import BaseStore, RecordFilter, Store, refused, store_key, unreadable, unstorable

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS eval_spill (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        store TEXT NOT NULL,
        id TEXT NOT NULL,
        record TEXT NOT NULL,
        spilled_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS ix_eval_spill_store ON eval_spill (store, seq)",
    *_deadletter.SCHEMA,
)
#: columns added since the first version, with their declarations (a file written before gains them)
_ADDED = {"tries": "INTEGER NOT NULL DEFAULT 0", "last_error": "TEXT"}


class SpillFile:
    """The `eval_spill` table: records waiting for their store, oldest first. Thread-safe."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = checked_path(path, "spill")
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            self._pid = os.getpid()
            conn = connect_wal(self.path, 30.0)
            for statement in _SCHEMA:
                conn.execute(statement)
            have = {row[1] for row in conn.execute("PRAGMA table_info(eval_spill)")}
            for name, declaration in _ADDED.items():
                if name not in have:
                    add_column(conn, "eval_spill", name, declaration)
            self._conn = conn
        return self._conn

    def append(self, store: str, records: Sequence[EvalRecord]) -> None:
        rows = [(store, r.id, record_json(r), time.time()) for r in records]
        with self._lock, immediate(self._connect()) as conn:
            conn.executemany("INSERT INTO eval_spill (store, id, record, spilled_at) VALUES (?, ?, ?, ?)", rows)

    def oldest(self, store: str, limit: int) -> list[tuple[int, EvalRecord]]:
        """The oldest rows' records. A row that does not read back as one (not JSON, not UTF-8, not
        a record: the file is on disk for anyone to write) goes to the dead letters, whole, at once,
        and an `error` record with its id takes its place: read again and again, it held up every
        record behind it for good."""
        found = []
        with self._lock:
            conn = self._connect()
            rows = conn.execute("SELECT seq, CAST(id AS BLOB), CAST(record AS BLOB) FROM eval_spill WHERE store = ? "
                                "ORDER BY seq LIMIT ?", (store, limit)).fetchall()
            for seq, record_id, data in rows:
                try:
                    record = EvalRecord.model_validate_json(data)
                except ValueError as exc:
                    record = unreadable({"id": bytes(record_id or b"").decode("utf-8", "replace"),
                                         "created_at": datetime.now(UTC)}, exc)
                    log.error("spill_row_unreadable", spill=self.path, seq=seq, record_id=record.id[:200])
                    with immediate(conn):
                        _deadletter.bury(conn, seq, f"this spilled row does not read back as a record: {exc}"[:2000],
                                         record_json(record))
                found.append((seq, record))
        return found

    def remove(self, seqs: Sequence[int]) -> None:
        with self._lock:
            conn = self._connect()
            for start in range(0, len(seqs), 500):
                chunk = list(seqs[start:start + 500])
                conn.execute(f"DELETE FROM eval_spill WHERE seq IN ({','.join('?' * len(chunk))})", chunk)

    def failed(self, seq: int, error: str) -> int:
        """One more failed try of row `seq`: how many it has had."""
        with self._lock:
            conn = self._connect()
            conn.execute("UPDATE eval_spill SET tries = tries + 1, last_error = ? WHERE seq = ?", (error, seq))
            row = conn.execute("SELECT tries FROM eval_spill WHERE seq = ?", (seq,)).fetchone()
        return 0 if row is None else int(row[0])

    def bury(self, seq: int, error: str) -> None:
        """Move row `seq` to the dead letters."""
        with self._lock, immediate(self._connect()) as conn:
            _deadletter.bury(conn, seq, error)

    def dead_letters(self, store: str) -> int:
        with self._lock:
            return _deadletter.count(self._connect(), store)

    def count(self, store: str) -> int:
        with self._lock:
            count: int = self._connect().execute("SELECT COUNT(*) FROM eval_spill WHERE store = ?",
                                                 (store,)).fetchone()[0]
            return count

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


class SpillingStore(BaseStore):
    """Wraps `store`: what it cannot take waits in the spill file at `path` and is re-delivered,
    in order, when it is back. Never raises for an outage; raises only if the spill file fails.

    ``batch_size``: records per re-delivery attempt. ``retry_interval`` / ``max_interval``: the
    backoff between attempts while the store is down (seconds). ``max_tries``: how often a record
    the store refuses is tried before it becomes a dead letter.
    """

    def __init__(self, store: Store, path: str | os.PathLike[str], *, batch_size: int = 500,
                 retry_interval: float = 0.2, max_interval: float = 5.0, max_tries: int = 5) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"SpillingStore batch_size must be an integer >= 1, got {batch_size!r}")
        if isinstance(max_tries, bool) or not isinstance(max_tries, int) or max_tries < 1:
            raise ValueError(f"SpillingStore max_tries must be an integer >= 1, got {max_tries!r}")
        check_number("SpillingStore retry_interval", retry_interval, minimum=0, allow_equal=False)
        check_number("SpillingStore max_interval", max_interval, minimum=0, allow_equal=False)
        if not (0 < retry_interval <= max_interval):
            raise ValueError(f"SpillingStore needs 0 < retry_interval <= max_interval, "
                             f"got retry_interval={retry_interval!r}, max_interval={max_interval!r}")
        self.store = store
        self.key = store_key(store)
        self.spill = SpillFile(path)
        self.batch_size = batch_size
        self.retry_interval = retry_interval
        self.max_interval = max_interval
        self.max_tries = max_tries
        self.spilled = self.redelivered = self.dead_lettered = 0
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._pending = False  # rows may wait: new writes queue behind them
        self._running = False
        self._task: Any = None
        self._idle = threading.Event()
        self._idle.set()
        runtime.add_waiter(self, self._wait_until)
        _live.add(self)
        if os.path.exists(self.spill.path) and self.spill.count(self.key):  # left by an earlier process
            self._kick()

    def __repr__(self) -> str:
        return f"SpillingStore({self.key}, spill={self.spill.path!r})"

    async def write(self, records: Sequence[EvalRecord]) -> None:
        if not records:
            return
        if not self._pending:
            try:
                await self.store.write(records)
                return
            except Exception as exc:
                log.warning("store_unavailable_spilling", store=self.key, spill=self.spill.path, records=len(records),
                            error_type=type(exc).__name__, error=str(exc), record_ids=[r.id for r in records])
        await anyio.to_thread.run_sync(self.spill.append, self.key, records)
        with self._lock:
            self.spilled += len(records)
        self._kick()

    def _kick(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's task and lock are not ours
            self._pid, self._lock, self._running, self._task = os.getpid(), threading.Lock(), False, None
        with self._lock:
            self._pending = True
            self._idle.clear()
            if self._running:
                return
            self._running = True
        # A plain task on the judgehooks loop, outside the portal's task group: at exit it is
        # cancelled before the loop stops, and its rows simply stay in the file.
        _stop_at_exit()
        try:
            self._task = runtime.call(_start_task, self._redeliver)
        except RuntimeError:  # called on the judgehooks loop itself
            self._task = asyncio.get_running_loop().create_task(self._redeliver())

    async def _redeliver(self) -> None:
        finished = False
        try:
            await self._redeliver_until_empty()
            finished = True
        except Exception:
            log.exception("spill_redelivery_stopped", store=self.key, spill=self.spill.path)
        finally:
            if not finished:  # crashed or cancelled at exit: the rows stay; the next write restarts it
                with self._lock:
                    self._running = False

    async def _redeliver_until_empty(self) -> None:
        interval = self.retry_interval
        failures = 0
        while True:
            batch = await anyio.to_thread.run_sync(self.spill.oldest, self.key, self.batch_size)
            if not batch:
                if await anyio.to_thread.run_sync(self._finish_if_empty):
                    return
                continue
            try:
                await self.store.write([record for _, record in batch])
            except Exception as exc:
                if await self._isolate(batch, exc):  # some went in, or a refused one was buried
                    interval, failures = self.retry_interval, 0
                    continue
                failures += 1
                if failures == 1 or failures % 20 == 0:
                    log.warning("store_still_unavailable", store=self.key, attempts=failures,
                                error_type=type(exc).__name__, error=str(exc), retry_in_s=interval)
                await anyio.sleep(interval)
                interval = min(interval * 2, self.max_interval)
                continue
            await self._redelivered([seq for seq, _ in batch], after_failures=failures)
            interval, failures = self.retry_interval, 0

    async def _redelivered(self, seqs: list[int], **event: Any) -> None:
        """These rows' records are in the store: out of the spill, counted, logged."""
        await anyio.to_thread.run_sync(self.spill.remove, seqs)
        with self._lock:
            self.redelivered += len(seqs)
        log.info("spill_redelivered", store=self.key, records=len(seqs), **event)

    async def _isolate(self, batch: list[tuple[int, EvalRecord]], exc: Exception) -> bool:
        """The batch failed: one record at a time, so a record the store refuses holds up no other.
        A refused record's tries are counted; at `max_tries` it becomes a dead letter. Stops at the
        first failure that looks like an outage. True when something was stored or buried."""
        stored: list[int] = []
        bad: list[tuple[int, EvalRecord, BaseException]] = []
        if len(batch) == 1:
            bad = [(batch[0][0], batch[0][1], exc)]
        else:
            for seq, record in batch:
                try:
                    await self.store.write([record])
                    stored.append(seq)
                except Exception as failure:
                    if not stored and not refused(failure):
                        break  # the store is down, not picky
                    bad.append((seq, record, failure))
        if stored:
            await self._redelivered(stored, one_at_a_time=True)
        buried = 0
        for seq, record, error in bad:
            if not (stored or refused(error)):
                continue  # an outage is no fault of this record's
            why = f"{type(error).__name__}: {error}"[:2000]
            if await anyio.to_thread.run_sync(self.spill.failed, seq, why) >= self.max_tries:
                await anyio.to_thread.run_sync(self.spill.bury, seq, why)
                buried += 1
                await self._stand_in(record, error)
        return bool(stored or buried)

    async def _stand_in(self, record: EvalRecord, error: BaseException) -> None:
        """A dead letter's `error` record in the store, so the evaluation still has one there."""
        with self._lock:
            self.dead_lettered += 1
        log.error("spill_dead_letter", store=self.key, spill=self.spill.path, record_id=record.id,
                  tries=self.max_tries, error_type=type(error).__name__, error=str(error))
        try:
            await self.store.write([unstorable(record, error)])
        except Exception as exc:  # the dead letter keeps the record whole either way
            log.warning("dead_letter_stand_in_failed", store=self.key, record_id=record.id,
                        error_type=type(exc).__name__, error=str(exc))

    def _finish_if_empty(self) -> bool:
        # Under the lock `_kick` takes: a record appended before this check is seen here; one
        # appended after it finds `_running` False and starts a new task.
        with self._lock:
            if self.spill.count(self.key):
                return False
            self._pending = self._running = False
            self._idle.set()
            return True

    def wait(self, timeout: float | None = None) -> bool:
        """Block until nothing waits in the spill (True), or `timeout` passes (False)."""
        return self._idle.wait(timeout)

    def _wait_until(self, timeout: float | None) -> bool:
        """`drain()`'s wait for this spill, saying so when it runs out of time."""
        if self.wait(timeout):
            return True
        log.warning("drain_timeout", store=self.key, spill_pending=self.stats()["spill_pending"])
        return False

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = {"spilled": self.spilled, "redelivered": self.redelivered}
        counts["spill_pending"] = self.spill.count(self.key) if self._pending else 0
        counts["dead_letters"] = self.spill.dead_letters(self.key) if os.path.exists(self.spill.path) else 0
        return counts

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        """The wrapped store's records (spilled ones appear once re-delivered)."""
        return await self.store.query(**where.keywords(), limit=limit)

    async def records_by_id(self, ids: Collection[str]) -> list[EvalRecord]:
        inner = self.store
        return await (inner.records_by_id(ids) if isinstance(inner, BaseStore) else super().records_by_id(ids))

    async def write_labels(self, labels: Sequence[Label]) -> None:
        """Kept by the store records are read from."""
        inner = self.store
        await (inner.write_labels(labels) if isinstance(inner, BaseStore) else super().write_labels(labels))

    async def read_labels(self) -> list[Label]:
        inner = self.store
        return await (inner.read_labels() if isinstance(inner, BaseStore) else super().read_labels())

    async def aclose(self) -> None:
        """Stop re-delivering and close the wrapped store. Spilled rows stay on disk for the next
        process (or `judgehooks resume`)."""
        runtime.remove_waiter(self)
        _live.discard(self)
        task, self._task = self._task, None
        if task is not None:
            task.get_loop().call_soon_threadsafe(task.cancel)
        await anyio.to_thread.run_sync(self.spill.close)
        await self.store.aclose()


async def _start_task(fn: Any) -> asyncio.Task[Any]:
    return asyncio.get_running_loop().create_task(fn())


async def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    await asyncio.wait([task], timeout=5)


def _stop_redelivery() -> None:
    """At exit, before the judgehooks loop stops: end re-delivery tasks (their rows stay on disk)."""
    for spilling in list(_live):
        task, spilling._task = spilling._task, None
        if task is not None and not task.done():
            try:
                runtime.call(_cancel, task)
            except Exception as exc:  # its rows stay on disk for the next process either way
                log.warning("spill_redelivery_stop_failed", store=spilling.key, error_type=type(exc).__name__,
                            error=str(exc))


_exit_hook = threading.Lock()
_exit_hook_installed = False
_live: weakref.WeakSet[SpillingStore] = weakref.WeakSet()  # stores whose re-delivery may be running


def _stop_at_exit() -> None:
    global _exit_hook_installed
    with _exit_hook:
        if not _exit_hook_installed:
            runtime.add_closer(_stop_redelivery, order=0)  # before pools close (order 1)
            _exit_hook_installed = True
