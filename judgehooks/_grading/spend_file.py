"""Spend caps shared through a SQLite file (`spend_ledger=PATH`): every process on the machine that
names the same file counts in it, e.g. the workers of one web server grading inline.

One row per budget key and window: its calls and cost. `reserve` reads and counts in one IMMEDIATE
transaction, which takes SQLite's write lock on the file, so two processes never both take a
window's last call. Windows are timed by this machine's clock; a key's rows two windows old go when
its next window starts. Values that are not numbers (a file edited by hand) count as zero. The file
locked past the timeout or unwritable: the call is admitted uncounted, with a warning, as when Redis
cannot be reached (the judge is not held up by the counter).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

import anyio.to_thread

from .._base.log import log
from .._base.sqlitefile import immediate
from .spend import Ticket

_SCHEMA = ("CREATE TABLE IF NOT EXISTS judgehooks_spend (key TEXT NOT NULL, window_start INTEGER NOT NULL, "
           "calls INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0, PRIMARY KEY (key, window_start))")


def _number(value: Any, kind: type[int] | type[float]) -> Any:
    return kind(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else kind(0)


class SQLiteLedger:
    """A `Ledger` in a SQLite file: every process that opens the same file shares the counts."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 10.0) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        self._local = threading.local()  # a connection per thread and process (sqlite3's rule)

    def __repr__(self) -> str:
        return f"SQLiteLedger({self.path!r})"

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _reserve(self, key: str, period: int, max_calls: int | None, max_cost_usd: float | None) -> Ticket:
        window = int(time.time()) // period * period
        with immediate(self._connect()) as conn:
            row = conn.execute("SELECT calls, cost_usd FROM judgehooks_spend WHERE key = ? AND window_start = ?",
                               (key, window)).fetchone()
            calls, cost = (0, 0.0) if row is None else (_number(row[0], int), _number(row[1], float))
            if (max_calls is not None and calls >= max_calls) or (max_cost_usd is not None and cost >= max_cost_usd):
                return Ticket(window, calls, cost, admitted=False)
            if row is None:  # this key's first call of the window: forget its windows that ended
                conn.execute("DELETE FROM judgehooks_spend WHERE key = ? AND window_start < ?", (key, window - period))
            conn.execute("INSERT INTO judgehooks_spend (key, window_start, calls, cost_usd) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT (key, window_start) DO UPDATE SET calls = excluded.calls",
                         (key, window, calls + 1, cost))
        return Ticket(window, calls + 1, cost)

    def _add_cost(self, key: str, window: int, cost_usd: float) -> None:
        self._connect().execute(
            "INSERT INTO judgehooks_spend (key, window_start, calls, cost_usd) VALUES (?, ?, 0, ?) ON CONFLICT "
            "(key, window_start) DO UPDATE SET cost_usd = (CASE WHEN typeof(cost_usd) IN ('integer', 'real') "
            "THEN cost_usd ELSE 0 END) + excluded.cost_usd", (key, window, cost_usd))

    async def reserve(self, key: str, period: int, max_calls: int | None, max_cost_usd: float | None) -> Ticket:
        try:
            return await anyio.to_thread.run_sync(self._reserve, key, period, max_calls, max_cost_usd)
        except (sqlite3.Error, OSError) as exc:
            self._unavailable(key, exc, "the call is admitted uncounted")
            return Ticket(0)

    async def add_cost(self, key: str, window: int, period: int, cost_usd: float) -> None:
        if not window:  # admitted while the file could not be used: nothing to add to
            return
        try:
            await anyio.to_thread.run_sync(self._add_cost, key, window, cost_usd)
        except (sqlite3.Error, OSError) as exc:
            self._unavailable(key, exc, "this call's cost is not counted")

    def _unavailable(self, key: str, exc: BaseException, note: str) -> None:
        log.warning("spend_cap_unavailable", key=key, ledger=self.path, error_type=type(exc).__name__,
                    error=str(exc), note=note)
