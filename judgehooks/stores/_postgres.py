"""PostgresStore: verdicts in PostgreSQL through psycopg 3 (async, pooled), written in batches.

Large batches are copied (COPY) straight into the table; if some ids are already there (a
re-delivered batch), the batch goes through a per-connection temporary table and one
`INSERT ... SELECT ... ON CONFLICT (id) DO NOTHING`. Small batches are one pipelined executemany
with ON CONFLICT DO NOTHING. Each write is one transaction and idempotent on the record id.
"""

from __future__ import annotations

import functools
import json
import os
import weakref
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .._base.feedback import Feedback
from .._base.jsondata import jsonable
from .._base.label import Label
from .._base.log import log
from .._base.record import FIELDS, EvalRecord
from .._base.text import lazy_pattern
from .._base.validate import check_finite
from .._runtime import runtime
from . import _feedback, _labels, _rollup, _rollup_meta
from ._base import BaseStore, RecordFilter, read_row
from ._indexes import ui_indexes

_TYPES = {"created_at": "TIMESTAMPTZ", "score": "DOUBLE PRECISION",
          "passed": "BOOLEAN", "threshold": "DOUBLE PRECISION", "latency_ms": "DOUBLE PRECISION",
          "prompt_tokens": "BIGINT", "completion_tokens": "BIGINT", "cost_usd": "DOUBLE PRECISION",
          "attempts": "BIGINT", "sample_rate": "DOUBLE PRECISION", "metadata": "JSONB",
          "details": "JSONB", "run_ids": "JSONB", "run_latency_ms": "DOUBLE PRECISION",
          "run_input_tokens": "BIGINT", "run_output_tokens": "BIGINT", "run_cost_usd": "DOUBLE PRECISION"}
#: the least work_mem the store's connections run with (`PostgresStore._configure`)
WORK_MEM = "16MB"
#: counters an older version declared INTEGER, which overflows at 2**31: widened on first use
_COUNTERS = tuple(name for name, kind in _TYPES.items() if kind == "BIGINT")
_IDENTIFIER = lazy_pattern(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
COPY_FROM = 32  # batches at least this large go through COPY; smaller ones through executemany
_STAGE = "judgehooks_stage"
_STAGE_COLUMNS = ", ".join(f"{f} {_TYPES.get(f, 'TEXT')}" for f in FIELDS)
_CONSTRAINTS = {"id": " PRIMARY KEY", "created_at": " NOT NULL"}
_LABEL_TYPES = {"passed": "BOOLEAN", "score": "DOUBLE PRECISION", "created_at": "TIMESTAMPTZ"}


def _clean(text: str) -> str:
    # PostgreSQL text cannot hold NUL; keep the record rather than refuse the whole batch.
    return text.replace("\x00", "\ufffd")


_JSON_AT = tuple(i for i, name in enumerate(FIELDS) if _TYPES.get(name) == "JSONB")


def _row(record: EvalRecord) -> tuple[Any, ...]:
    values = [record.__dict__[name] for name in FIELDS]
    for i, value in enumerate(values):
        if value.__class__ is str and "\x00" in value:
            values[i] = _clean(value)
    for i in _JSON_AT:
        values[i] = (json.dumps(jsonable(values[i]), ensure_ascii=False).replace("\\u0000", "\\ufffd")
                     if values[i] else "{}")
    return tuple(values)


def _record(row: Sequence[Any]) -> EvalRecord:
    return read_row(dict(zip(FIELDS, row, strict=True)), _build)


def _build(row: Mapping[str, Any]) -> EvalRecord:
    data = dict(row)
    threshold = data["threshold"]
    if isinstance(threshold, float) and threshold.is_integer():
        data["threshold"] = int(threshold)  # an LLM judge's 1-10 comes back as it went in
    return EvalRecord.model_validate(data)


def _import_psycopg() -> Any:
    try:
        import psycopg_pool
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("PostgresStore needs psycopg 3 with its pool: pip install 'judgehooks[postgres]'") from exc
    return psycopg_pool


def _close_at_exit(ref: weakref.ref[PostgresStore]) -> None:
    """Close the pool while the judgehooks loop still runs, so no pool task dies with the loop."""
    store = ref()
    if store is not None and store._pool_ is not None and store._pid == os.getpid():
        try:
            runtime.call(store._close)
        except Exception as exc:  # every record is already stored or spilled; say why the pool did not close
            log.warning("postgres_pool_close_failed", store=repr(store), error_type=type(exc).__name__,
                        error=str(exc))


def _unique_violation() -> type[Exception]:
    from psycopg.errors import UniqueViolation

    return UniqueViolation


async def _add_rollup(conn: Any, table: str) -> None:
    """The hourly counts the UI reads (`stores._rollup`, `stores._rollup_meta`), and the transaction id
    that says how far they reach (set by the database: nothing for the writer to do)."""
    cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL AND EXISTS (SELECT 1 FROM information_schema.columns "
                             "WHERE table_schema = current_schema() AND table_name = %s AND column_name = 'txid')",
                             (f"{_rollup_meta.meta_table(table)}_state", table))
    if (await cur.fetchone())[0]:  # there already: no ALTER TABLE (its lock) on every start
        return
    for sql in (*_rollup.postgres_setup(table), *_rollup_meta.setup(table, "BIGINT")):
        await conn.execute(sql)


class PostgresStore(BaseStore):
    """Store in PostgreSQL: an async connection pool, batched idempotent writes, the table created
    on first use, the same `query` filters as SQLiteStore.

    ``dsn`` is a libpq connection string or URL. Options: ``table`` (default "eval_records"),
    ``min_size`` / ``max_size`` (pool, default 1 / 4), ``timeout`` (seconds to wait for a
    connection, default 5), ``connect_timeout`` (default 5).
    """

    def __init__(self, dsn: str, *, table: str = "eval_records", min_size: int = 1, max_size: int = 4,
                 timeout: float = 5.0, connect_timeout: float = 5.0) -> None:
        if not isinstance(dsn, str) or not dsn.strip():
            raise ValueError("PostgresStore dsn must be a non-empty connection string or URL, "
                             "e.g. 'postgresql://user@127.0.0.1:5432/db'")
        if not _IDENTIFIER.match(table):
            raise ValueError(f"PostgresStore table {table!r} must be a plain SQL identifier "
                             "(letters, digits, underscore; not starting with a digit; at most 63 characters)")
        sizes_ok = isinstance(min_size, int) and isinstance(max_size, int) and 0 <= min_size <= max_size
        if not sizes_ok or max_size < 1:
            raise ValueError(f"PostgresStore needs integers 0 <= min_size <= max_size and max_size >= 1, "
                             f"got min_size={min_size!r}, max_size={max_size!r}")
        for name, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"PostgresStore {name} must be a number of seconds > 0, got {value!r}")
            check_finite(f"PostgresStore {name}", value)
        _import_psycopg()
        self.dsn = dsn
        self.table = table
        self._options = {"min_size": min_size, "max_size": max_size, "timeout": float(timeout)}
        self._connect_timeout = connect_timeout
        # A pool belongs to the event loop that opened it: it lives on the judgehooks loop, and
        # calls from other loops are run there (`runtime.on_loop`).
        self._pool_: Any = None
        self._schema_ready = False
        self._pid = os.getpid()

    def __repr__(self) -> str:
        from psycopg.conninfo import conninfo_to_dict

        try:  # never the password
            p = conninfo_to_dict(self.dsn)
            where = f"{p.get('host', '')}:{p.get('port', '')}/{p.get('dbname', '')}"
        except Exception:
            where = "?"
        return f"PostgresStore({where!r}, table={self.table!r})"

    async def _configure(self, conn: Any) -> None:
        from psycopg.types.json import set_json_loads

        set_json_loads(_json_loads, conn)
        await conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} ({_STAGE_COLUMNS}) ON COMMIT DELETE ROWS")
        # `judgehooks ui`'s searches AND the text index's bitmap with the filters': under the default
        # 4 MB it turns lossy at a million records, and every row of its pages is tested again (1.2 s
        # against 23 ms). Raised to WORK_MEM for these connections, never lowered.
        await conn.execute("SELECT set_config('work_mem', %s, false) WHERE pg_size_bytes(current_setting('work_mem')) "
                           "< pg_size_bytes(%s)", (WORK_MEM, WORK_MEM))

    async def _pool(self) -> Any:
        if self._pid != os.getpid():  # forked: the parent's sockets are not ours
            self._pid, self._pool_, self._schema_ready = os.getpid(), None, False
        if self._pool_ is None:
            # First use: one direct connection creates the schema, so an unreachable server fails
            # at once with its own reason, not after the pool's timeout and reconnect warnings.
            if not self._schema_ready:
                await self._create_schema()
            psycopg_pool = _import_psycopg()
            pool = psycopg_pool.AsyncConnectionPool(
                self.dsn, open=False, configure=self._configure, name=f"judgehooks-{self.table}",
                kwargs=self._connect_kwargs(), **self._options)
            if self._pool_ is None:
                self._pool_ = pool
                await pool.open(wait=False)
                runtime.add_closer(functools.partial(_close_at_exit, weakref.ref(self)), order=1)
        return self._pool_

    def _connect_kwargs(self) -> dict[str, Any]:
        # jit off: the store's queries are short, and PostgreSQL's JIT spends ~100 ms compiling each
        # one it deems costly (the UI's counts) before it runs. Before the options the dsn or
        # $PGOPTIONS gives (a search_path, a statement_timeout), which this argument would otherwise
        # replace, and which may turn JIT on again.
        from psycopg.conninfo import conninfo_to_dict

        try:
            given = conninfo_to_dict(self.dsn).get("options") or os.environ.get("PGOPTIONS", "")
        except Exception:  # a malformed dsn: the connection says what is wrong with it
            given = ""
        return {"autocommit": True, "connect_timeout": int(max(1, self._connect_timeout)),
                "options": f"-c jit=off {given}".strip()}

    async def _create_schema(self) -> None:
        import psycopg

        t = self.table
        columns = ",\n  ".join(f"{f} {_TYPES.get(f, 'TEXT')}{_CONSTRAINTS.get(f, '')}" for f in FIELDS)
        try:
            conn = await psycopg.AsyncConnection.connect(self.dsn, **self._connect_kwargs())
        except psycopg.OperationalError as exc:  # libpq's message spans lines: one line names the problem
            raise psycopg.OperationalError(f"{self!r}: {' '.join(str(exc).split())}") from exc
        async with conn, conn.transaction():
            # Serialise concurrent first uses (several processes): CREATE ... IF NOT EXISTS can race.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"judgehooks:{t}",))
            await conn.execute(f"CREATE TABLE IF NOT EXISTS {t} (\n  {columns}\n)")
            for f in FIELDS:  # a table written by an older version: add the fields it has no column for
                await conn.execute(f"ALTER TABLE {t} ADD COLUMN IF NOT EXISTS {f} {_TYPES.get(f, 'TEXT')}")
            cur = await conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = %s AND data_type = 'integer' AND column_name = ANY(%s)", (t, list(_COUNTERS)))
            for (column,) in await cur.fetchall():  # and widen its INTEGER counters to BIGINT
                await conn.execute(f"ALTER TABLE {t} ALTER COLUMN {column} TYPE BIGINT")
            await conn.execute(f"CREATE INDEX IF NOT EXISTS ix_{t}_agent ON {t} (agent_id, created_at)")
            await conn.execute(f"CREATE INDEX IF NOT EXISTS ix_{t}_team ON {t} (team_id, created_at)")
            await conn.execute(f"CREATE INDEX IF NOT EXISTS ix_{t}_created ON {t} (created_at)")
            for sql in ui_indexes(t, postgres=True):  # `judgehooks ui`'s, as SQLite's
                await conn.execute(sql)
            await _add_rollup(conn, t)
            await conn.execute(_labels.create_sql(_labels.labels_table(t), _LABEL_TYPES))
            for sql in _feedback.create_sql(_feedback.feedback_table(t), _LABEL_TYPES):
                await conn.execute(sql)
        self._schema_ready = True

    async def write(self, records: Sequence[EvalRecord]) -> None:
        if records:
            await runtime.on_loop(self._write, [_row(r) for r in records])

    async def _write(self, rows: list[tuple[Any, ...]]) -> None:
        names = ", ".join(FIELDS)
        pool = await self._pool()
        async with pool.connection() as conn:
            if len(rows) < COPY_FROM:
                marks = ", ".join(["%s"] * len(FIELDS))
                async with conn.transaction(), conn.cursor() as cur:
                    await cur.executemany(
                        f"INSERT INTO {self.table} ({names}) VALUES ({marks}) ON CONFLICT (id) DO NOTHING", rows)
                return
            # Straight into the table: the fast path, since ids are new unless a batch is re-delivered.
            try:
                async with conn.transaction(), conn.cursor() as cur:
                    async with cur.copy(f"COPY {self.table} ({names}) FROM STDIN") as copy:
                        for row in rows:
                            await copy.write_row(row)
                return
            except _unique_violation():
                pass  # some ids are stored already: the transaction rolled back; skip them instead
            async with conn.transaction(), conn.cursor() as cur:
                async with cur.copy(f"COPY {_STAGE} ({names}) FROM STDIN") as copy:
                    for row in rows:
                        await copy.write_row(row)
                await cur.execute(f"INSERT INTO {self.table} ({names}) SELECT {names} FROM {_STAGE} "
                                  "ON CONFLICT (id) DO NOTHING")

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        """Newest first, filtered like SQLiteStore.query."""
        sql, args = where.select_sql(self.table, FIELDS, "%s", lambda ts: ts, limit)
        return [_record(row) for row in await runtime.on_loop(self._fetch, sql, args)]

    async def _fetch(self, sql: str, args: list[Any]) -> list[Any]:
        pool = await self._pool()
        async with pool.connection() as conn, conn.cursor() as cur:
            await cur.execute(sql, args)
            rows: list[Any] = await cur.fetchall()
            return rows

    async def records_by_id(self, ids: Collection[str]) -> list[EvalRecord]:
        found = []
        for chunk in _labels.chunks(ids):
            sql = f"SELECT {', '.join(FIELDS)} FROM {self.table} WHERE id = ANY(%s)"
            found += [_record(row) for row in await runtime.on_loop(self._fetch, sql, [chunk])]
        return found

    async def write_labels(self, labels: Sequence[Label]) -> None:
        if labels:
            await runtime.on_loop(self._write_labels, [_labels.row(label, lambda ts: ts) for label in labels])

    async def _write_labels(self, rows: list[tuple[Any, ...]]) -> None:
        pool = await self._pool()
        async with pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(_labels.upsert_sql(_labels.labels_table(self.table), "%s"),
                                  [tuple(_clean(v) if isinstance(v, str) else v for v in row) for row in rows])

    async def read_labels(self) -> list[Label]:
        rows = await runtime.on_loop(self._fetch, _labels.select_sql(_labels.labels_table(self.table)), [])
        return _labels.from_rows(rows)

    async def write_feedback(self, items: Sequence[Feedback]) -> None:
        if items:
            await runtime.on_loop(self._write_feedback, [_feedback.row(item, lambda ts: ts) for item in items])

    async def _write_feedback(self, rows: list[tuple[Any, ...]]) -> None:
        pool = await self._pool()
        async with pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(_feedback.upsert_sql(_feedback.feedback_table(self.table), "%s"),
                                  [tuple(_clean(v) if isinstance(v, str) else v for v in row) for row in rows])

    async def read_feedback(self, run_ids: Collection[str] | None = None) -> list[Feedback]:
        found = []
        for sql, params in _feedback.selects(_feedback.feedback_table(self.table), "%s", run_ids):
            found += _feedback.from_rows(await runtime.on_loop(self._fetch, sql, params))
        return _feedback.sort(found)

    async def aclose(self) -> None:
        """Close the pool; the next call opens a new one."""
        await runtime.on_loop(self._close)

    async def _close(self) -> None:
        pool, self._pool_ = self._pool_, None
        if pool is not None and self._pid == os.getpid():
            await pool.close()


def _json_loads(data: bytes | str) -> Any:
    """The store connections' JSON loader: a value nested deeper than Python can read (a row another
    program wrote) comes back as its text, which `read_row` refuses as an error record, instead of
    failing the whole fetch, and every query that meets the row with it."""
    try:
        return json.loads(data)
    except RecursionError:
        return data if isinstance(data, str) else data.decode("utf-8", "replace")
