"""What tests read in an outbox: the pending jobs, and a way to leave them as a process that died would."""

from __future__ import annotations

import os
import sqlite3

from judgehooks._grading.outbox import pending_counts

GONE = "gone-host:1:x"


def pending(path: str | os.PathLike[str]) -> int:
    """How many jobs wait in the outbox at `path` (read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sum(pending_counts(conn).values())
    finally:
        conn.close()


def connect(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection to the outbox file (autocommit)."""
    return sqlite3.connect(path, isolation_level=None)


def abandon(path: str | os.PathLike[str], where: str = "1") -> None:
    """Every pending job (matching the SQL condition `where`) as a process that died left it."""
    conn = connect(path)
    conn.execute(f"UPDATE eval_jobs SET owner = ? WHERE {where}", (GONE,))
    conn.close()
