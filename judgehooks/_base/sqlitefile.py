"""What the SQLite store, the outbox and the JSONL stores share: path checks, files created
private (0600: they hold users' inputs and answers), WAL connections and locked line appends."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path


def checked_path(path: str | os.PathLike[str], label: str) -> str:
    """The path as a string, refused at construction when its directory does not exist."""
    text = str(path)
    if text != ":memory:":
        parent = Path(text).expanduser().resolve().parent
        if not parent.is_dir():
            raise ValueError(f"{label} path {text!r}: directory {str(parent)!r} does not exist")
    return text


#: the mode judgehooks creates its files with: only their owner may read them
PRIVATE = 0o600


def check_mode(mode: object, label: str) -> int:
    """A file mode setting, refused unless it is permission bits (e.g. 0o600, 0o640)."""
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
        raise ValueError(f"{label} mode must be file permission bits such as 0o600 or 0o640, got {mode!r}")
    return mode


def create_file(path: str, mode: int = PRIVATE) -> None:
    """Create `path` empty with `mode` unless it exists; an existing file keeps its own mode."""
    if path == ":memory:":
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
    except FileExistsError:
        return
    os.chmod(path, mode)  # exactly `mode`, whatever the umask


def connect_wal(path: str, timeout: float, *, autocheckpoint: bool = True, mode: int = PRIVATE,
                journal_limit: int | None = None) -> sqlite3.Connection:
    """A connection usable from any thread (callers serialise it), WAL, synchronous=NORMAL:
    a committed write survives the process being killed.

    A new database file is created with `mode` first: SQLite gives its -wal and -shm files the
    database file's mode. `journal_limit` (bytes): the WAL is cut back to it after a checkpoint."""
    create_file(path, mode)
    conn = sqlite3.connect(path, timeout=timeout, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    if not autocheckpoint:
        conn.execute("PRAGMA wal_autocheckpoint=0")
    if journal_limit is not None:
        conn.execute(f"PRAGMA journal_size_limit={int(journal_limit)}")
    return conn


def add_column(conn: sqlite3.Connection, table: str, name: str, declaration: str) -> None:
    """Migrate: add a column to `table`. Another connection (a thread, a process) opening the same
    file may have added it between our look at the table and this statement: that is success."""
    try:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")
    except sqlite3.OperationalError as exc:
        if "duplicate column name" not in str(exc):
            raise


def append_lines(fd: int, data: bytes, *, end_torn_line: bool, fsync: bool = False) -> None:
    """Append whole lines to `fd` (opened ``O_RDWR | O_APPEND``) under an exclusive `flock`.

    Every writer of a lines file holds the lock for its whole write, so concurrent processes never
    interleave inside a line, and `end_torn_line` (a crash's torn last line gets a newline first)
    never mistakes a record that another process is still copying in for a torn line.
    """
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        if end_torn_line:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
        view = memoryview(data)
        while view:  # write() may be short on some filesystems; finish the batch
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on an autocommit connection: BEGIN IMMEDIATE, then COMMIT (ROLLBACK on any error)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
