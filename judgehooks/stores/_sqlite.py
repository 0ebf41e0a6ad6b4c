"""SQLiteStore: the embedded default. One WAL-mode file, one table, one column per record field."""

from __future__ import annotations

import json
import operator
import os
import sqlite3
import threading
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread

from .._base.feedback import Feedback
from .._base.jsondata import json_text
from .._base.label import Label
from .._base.record import FIELDS, EvalRecord
from .._base.sqlitefile import PRIVATE, add_column, check_mode, checked_path, connect_wal
from .._base.statedir import state_file
from .._base.validate import check_number
from . import _feedback, _labels
from ._base import BaseStore, RecordFilter, read_row, store_key
from ._indexes import ui_indexes

TABLE = "eval_records"
_TYPES = {"score": "REAL", "passed": "INTEGER", "threshold": "NUMERIC", "latency_ms": "REAL",
          "prompt_tokens": "INTEGER", "completion_tokens": "INTEGER", "cost_usd": "REAL", "attempts": "INTEGER",
          "sample_rate": "REAL", "run_latency_ms": "REAL", "run_input_tokens": "INTEGER",
          "run_output_tokens": "INTEGER", "run_cost_usd": "REAL"}
_COLUMNS = ",\n  ".join(
    "id TEXT PRIMARY KEY" if f == "id" else f"{f} {_TYPES.get(f, 'TEXT')}" for f in FIELDS)
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (\n  {_COLUMNS}\n)",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_agent ON {TABLE} (agent_id, created_at)",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_team ON {TABLE} (team_id, created_at)",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_created ON {TABLE} (created_at)",
    f"DROP INDEX IF EXISTS ix_{TABLE}_overview",  # an older file's narrower one: ix_..._graded replaces it
    *ui_indexes(TABLE),
    _labels.create_sql("eval_labels", {"passed": "INTEGER", "score": "REAL"}),
    *_feedback.create_sql("eval_feedback", {"passed": "INTEGER", "score": "REAL"}),
)
_UPSERT_FEEDBACK = _feedback.upsert_sql("eval_feedback", "?")
_UPSERT_LABEL = _labels.upsert_sql("eval_labels", "?")
_JSON = ("metadata", "details", "run_ids")
_INSERT = f"INSERT OR IGNORE INTO {TABLE} ({', '.join(FIELDS)}) VALUES ({', '.join('?' * len(FIELDS))})"


def _ts(value: datetime) -> str:
    # Fixed-width UTC text sorts in time order, so range queries can use the indexes.
    return (value if value.tzinfo is UTC else value.astimezone(UTC)).isoformat(timespec="microseconds")


_CREATED, _PASSED = FIELDS.index("created_at"), FIELDS.index("passed")
_JSON_AT = tuple(FIELDS.index(name) for name in _JSON)
_VALUES = operator.itemgetter(*FIELDS)  # a record's field values, in column order, without pydantic's attribute cost


def _row(record: EvalRecord) -> tuple[Any, ...]:
    values = list(_VALUES(record.__dict__))
    values[_CREATED] = _ts(values[_CREATED])
    for i in _JSON_AT:
        values[i] = json_text(values[i]) if values[i] else "{}"
    if values[_PASSED] is not None:
        values[_PASSED] = int(values[_PASSED])
    return tuple(values)


def _record(row: sqlite3.Row) -> EvalRecord:
    return read_row(dict(zip(FIELDS, row, strict=True)), _build)


def _build(row: Mapping[str, Any]) -> EvalRecord:
    data = dict(row)
    for name in _JSON:
        data[name] = json.loads(data[name] or "{}")
    if data["passed"] is not None:
        data["passed"] = bool(data["passed"])
    return EvalRecord.model_validate(data)


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Migrate a file written by an older version: add the record fields it has no column for."""
    have = {row[1] for row in conn.execute(f"PRAGMA table_info({TABLE})")}
    for name in FIELDS:
        if name not in have:
            add_column(conn, TABLE, name, _TYPES.get(name, "TEXT"))


class SQLiteStore(BaseStore):
    """Embedded store: a SQLite file in WAL mode, writes batched and idempotent on record id.

    The connection opens on first use; blocking calls run on a worker thread, never on the event
    loop. ``path`` may be ``":memory:"`` for a throwaway database. A new file (and its -wal and
    -shm files) is created with ``mode``, by default 0600: it holds users' inputs and answers.
    """

    def __init__(self, path: str | os.PathLike[str] = "judgehooks.db", *, timeout: float = 30.0,
                 mode: int = PRIVATE) -> None:
        self.path = checked_path(path, "SQLiteStore")
        self.mode = check_mode(mode, "SQLiteStore")
        check_number("SQLiteStore timeout", timeout, minimum=0)
        self._timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def _fork_check(self) -> None:
        # A connection (or a held lock) inherited through fork() must not be used by the child.
        if self._pid != os.getpid():
            self._pid, self._conn, self._lock = os.getpid(), None, threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = connect_wal(self.path, self._timeout, mode=self.mode)
            conn.execute(_SCHEMA[0])  # the table; an older file's gains its new columns before any index names them
            _add_missing_columns(conn)
            for statement in _SCHEMA[1:]:
                conn.execute(statement)
            self._conn = conn
        return self._conn

    def _write(self, rows: list[tuple[Any, ...]], sql: str = _INSERT) -> None:
        self._fork_check()
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    async def write(self, records: Sequence[EvalRecord]) -> None:
        if records:
            rows = [_row(r) for r in records]
            await anyio.to_thread.run_sync(self._write, rows)

    def query_sync(self, *, limit: int | None = 1000, **filters: Any) -> list[EvalRecord]:
        """Newest first, with `query`'s keywords. Blocking; `query` is the async form."""
        return self._select(RecordFilter(**filters), limit)

    def _select(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        sql, args = where.select_sql(TABLE, FIELDS, "?", _ts, limit)
        self._fork_check()
        with self._lock:
            rows = self._connect().execute(sql, args).fetchall()
        return [_record(row) for row in rows]

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        return await anyio.to_thread.run_sync(self._select, where, limit)

    def _locked(self, fn: Any, *args: Any) -> Any:
        self._fork_check()
        with self._lock:
            return fn(self._connect(), *args)

    async def records_by_id(self, ids: Collection[str]) -> list[EvalRecord]:
        def select(conn: sqlite3.Connection) -> list[EvalRecord]:
            found = []
            for chunk in _labels.chunks(ids):
                sql = f"SELECT {', '.join(FIELDS)} FROM {TABLE} WHERE id IN ({', '.join('?' * len(chunk))})"
                found += [_record(row) for row in conn.execute(sql, chunk).fetchall()]
            return found

        return list(await anyio.to_thread.run_sync(self._locked, select))

    async def write_labels(self, labels: Sequence[Label]) -> None:
        if labels:
            await anyio.to_thread.run_sync(self._write, [_labels.row(label, _ts) for label in labels], _UPSERT_LABEL)

    async def read_labels(self) -> list[Label]:
        def select(conn: sqlite3.Connection) -> list[Label]:
            return _labels.from_rows(conn.execute(_labels.select_sql("eval_labels")).fetchall())

        return list(await anyio.to_thread.run_sync(self._locked, select))

    async def write_feedback(self, items: Sequence[Feedback]) -> None:
        if items:
            rows = [_feedback.row(item, _ts) for item in items]
            await anyio.to_thread.run_sync(self._write, rows, _UPSERT_FEEDBACK)

    async def read_feedback(self, run_ids: Collection[str] | None = None) -> list[Feedback]:
        def select(conn: sqlite3.Connection) -> list[Feedback]:
            return [item for sql, params in _feedback.selects("eval_feedback", "?", run_ids)
                    for item in _feedback.from_rows(conn.execute(sql, params).fetchall())]

        return _feedback.sort(await anyio.to_thread.run_sync(self._locked, select))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self.close)


def outbox_path_for(store: object) -> str:
    """Where background jobs (and spilled records, and open sessions) wait: beside a SQLite store
    file (evals.db -> evals.outbox.db), else $JUDGEHOOKS_OUTBOX, else a file of that store's own in
    the per-user state folder (`judgehooks._base.statedir`), named after the store (`store_key`):
    never the working directory, and the same file for every process, and `judgehooks resume`,
    that names the same store."""
    path = store.path if isinstance(store, SQLiteStore) else None
    if path and path != ":memory:":
        return f"{path[:-3] if path.endswith('.db') else path}.outbox.db"
    return os.environ.get("JUDGEHOOKS_OUTBOX") or state_file("outbox", store_key(store))
