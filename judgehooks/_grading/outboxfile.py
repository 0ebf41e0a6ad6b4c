"""The outbox file: one SQLite file (WAL, synchronous=NORMAL) that the job log and the session
book each hold, with ONE liveness scheme for both.

Every process that writes the file registers an owner id (``host:pid:nonce``) in `eval_owners` and
beats its heart there. An owner is gone when it is on this host and its pid is dead, or when it has
not beaten for `stale_after` seconds: its pending jobs are claimed and its session leases lapse.
The file's tenants (jobs, sessions, spilled records) keep tables of their own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._base.sqlitefile import checked_path, connect_wal, immediate

HOST = socket.gethostname()
#: the WAL is cut back to this size after a checkpoint, and truncated when it outgrows it
WAL_LIMIT = 4 * 1024 * 1024

_OWNERS = """CREATE TABLE IF NOT EXISTS eval_owners (
    owner TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, heartbeat REAL NOT NULL
)"""


def text_of(data: bytes) -> str:
    """A text value read from the file: bytes that are not UTF-8 (another program's, a hostile write)
    come as U+FFFD, where sqlite3 raises, inside every claim's transaction, on reading them."""
    return data.decode("utf-8", "replace")


def new_owner() -> str:
    return f"{HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def pid_alive(pid: object) -> bool:
    """Whether a process of this host has `pid`: never one that is not a positive int (an owner row
    this library did not write), nor one past the kernel's range."""
    if type(pid) is not int or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def dead_here(owner: str) -> bool:
    """Whether `owner` (an id `new_owner` made) is a process of this host that is no longer running."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return host == HOST and pid.isascii() and pid.isdigit() and not pid_alive(int(pid))


class OutboxFile:
    """This process's connections to one outbox file: opened on first use, again after a fork (with a
    new owner id), its owner row registered; checkpoints on a connection of their own. Thread-safe:
    callers hold `lock` around the connection that `connect()` returns."""

    def __init__(self, path: str | os.PathLike[str], *, stale_after: float = 30.0, wal_limit: int = WAL_LIMIT) -> None:
        self.path = checked_path(path, "outbox")
        # where the file is, whatever later chdir() the process makes
        self._where = self.path if self.path == ":memory:" else os.path.abspath(self.path)
        self.stale_after = stale_after
        self.wal_limit = wal_limit
        self.owner = new_owner()
        self.lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._schemas: list[Callable[[sqlite3.Connection], None]] = []
        self.maint_lock = threading.Lock()  # checkpoints use their own connection: never hold up a put
        self._maint_conn: sqlite3.Connection | None = None
        self._folded: int | None = None  # the data_version when a checkpoint last folded all of the WAL
        self._next_beat = 0.0

    def __repr__(self) -> str:
        return f"OutboxFile({self.path!r})"

    def add_schema(self, create: Callable[[sqlite3.Connection], None]) -> None:
        """`create(conn)` runs on every new connection (a tenant's tables), before its first use."""
        self._schemas.append(create)
        if self._conn is not None:
            create(self._conn)

    def connect(self) -> sqlite3.Connection:
        """The connection (the caller holds `lock`)."""
        if self._conn is None or self._pid != os.getpid():
            if self._pid != os.getpid():
                self._forget_parent()
            # Checkpoints copy the WAL into the database and fsync: never on the hook path.
            conn = connect_wal(self._where, 30.0, autocheckpoint=False, journal_limit=self.wal_limit)
            conn.text_factory = text_of
            conn.execute(_OWNERS)
            for create in self._schemas:
                create(conn)
            conn.execute("INSERT OR REPLACE INTO eval_owners VALUES (?, ?, ?, ?)",
                         (self.owner, HOST, self._pid, time.time()))
            self._conn = conn
        return self._conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (`immediate`) on the connection, holding `lock`."""
        with self.lock, immediate(self.connect()) as conn:
            yield conn

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """One statement's rows, read holding `lock` (`args` never name this owner: read before connecting)."""
        with self.lock:
            return self.connect().execute(sql, args).fetchall()

    def run(self, sql: str, args: Sequence[Any] = ()) -> int:
        """One statement (its own transaction), holding `lock`: the rows it changed."""
        with self.lock:
            return self.connect().execute(sql, args).rowcount

    @property
    def open(self) -> bool:
        """Whether this process has opened the file (nothing to release or give back otherwise)."""
        return self._conn is not None and self._pid == os.getpid()

    def _forget_parent(self) -> None:
        # The parent's connections are not ours, and neither is its owner id: a job filed under it
        # would wait for the parent to die before anyone claimed it.
        self._pid, self.owner = os.getpid(), new_owner()
        self._conn = self._maint_conn = self._folded = None  # data_version is per connection

    def reset_after_fork(self) -> None:
        """In a forked child: fresh locks (a parent thread may have held them), an owner id of its own."""
        self.lock, self.maint_lock = threading.Lock(), threading.Lock()
        if self._pid != os.getpid():
            self._forget_parent()

    def heartbeat(self) -> None:
        """This owner is alive (registered again if a process that took it for dead removed it)."""
        with self.lock:  # the owner and pid read after connect(): a forked child's are its own
            self.connect().execute("INSERT OR REPLACE INTO eval_owners VALUES (?, ?, ?, ?)",
                                   (self.owner, HOST, self._pid, time.time()))

    def upkeep(self) -> None:
        """Once a round of a dispatcher's upkeep or a session clock: the WAL folded when it changed;
        this owner's heart beaten every third of `stale_after` (at least a second apart)."""
        try:
            self.checkpoint()
        finally:  # whatever failed above: a process that stops beating is taken for dead
            if time.monotonic() >= self._next_beat:
                self.heartbeat()
                self._next_beat = time.monotonic() + max(1.0, self.stale_after / 3)

    def owners(self, conn: sqlite3.Connection) -> tuple[list[str], set[str]]:
        """The registered owners that are gone, and those alive (this one always). A heartbeat that is
        not a time within `stale_after` of now (text; the far future) is a row this library never wrote: gone."""
        now = time.time()
        dead, alive = [], {self.owner}
        for owner, host, pid, beat in conn.execute("SELECT owner, host, pid, heartbeat FROM eval_owners"):
            if owner == self.owner:
                continue
            fresh = type(beat) in (int, float) and abs(now - beat) <= self.stale_after
            if not fresh or (host == HOST and not pid_alive(pid)):
                dead.append(owner)
            else:
                alive.add(owner)
        return dead, alive

    def maintenance(self) -> sqlite3.Connection:
        """The checkpoint and read-only look connection (the caller holds `maint_lock`)."""
        if self._maint_conn is None:
            with self.lock:
                self.connect()  # schema first
            conn = connect_wal(self._where, 30.0, autocheckpoint=False, journal_limit=self.wal_limit)
            conn.text_factory = text_of
            conn.execute("PRAGMA busy_timeout=0")  # a truncating checkpoint gives way rather than wait
            self._maint_conn = conn
        return self._maint_conn

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (PASSIVE: never waits for, or blocks, writers); once
        the WAL has outgrown `wal_limit`, also truncate it, if that can be done without waiting.
        Nothing to do when no connection (this process's or another's) has committed since a
        checkpoint that folded all of the WAL: SQLite's `data_version` says so, whatever the file system."""
        with self.maint_lock:
            conn = self.maintenance()
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if version == self._folded:
                return
            busy, frames, folded = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            try:
                if os.path.getsize(f"{self._where}-wal") > self.wal_limit:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    return  # the truncation changed the file: the next round looks again
            except (OSError, sqlite3.OperationalError):  # no WAL file, or busy: the next round tries again
                return
            if not busy and frames == folded:  # all of it, as of `version` at least: a later commit changes it
                self._folded = version

    def wal_size(self) -> int:
        """The WAL file's size in bytes (0 when there is none)."""
        try:
            return os.path.getsize(f"{self._where}-wal")
        except OSError:
            return 0

    def release(self) -> None:
        """At a clean exit: this owner counts as gone at once, so the next process claims what it left."""
        with self.lock:
            if self.open:
                assert self._conn is not None
                self._conn.execute("UPDATE eval_owners SET heartbeat = 0 WHERE owner = ?", (self.owner,))

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        with self.maint_lock:
            if self._maint_conn is not None:
                self._maint_conn.close()
                self._maint_conn = self._folded = None
