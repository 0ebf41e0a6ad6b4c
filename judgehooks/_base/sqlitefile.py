"""What the SQLite store and the outbox share: path checks and WAL connections."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


def checked_path(path: str | os.PathLike[str], label: str) -> str:
    """The path as a string, refused at construction when its directory does not exist."""
    text = str(path)
    if text != ":memory:":
        parent = Path(text).expanduser().resolve().parent
        if not parent.is_dir():
            raise ValueError(f"{label} path {text!r}: directory {str(parent)!r} does not exist")
    return text


def connect_wal(path: str, timeout: float, *, autocheckpoint: bool = True) -> sqlite3.Connection:
    """A connection usable from any thread (callers serialise it), WAL, synchronous=NORMAL:
    a committed write survives the process being killed."""
    conn = sqlite3.connect(path, timeout=timeout, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    if not autocheckpoint:
        conn.execute("PRAGMA wal_autocheckpoint=0")
    return conn
