"""What tests read in an outbox file: the pending jobs, wherever they are (the indexed table or the
log not folded yet), and a way to leave them as a process that died would."""

from __future__ import annotations

import os
import sqlite3

from judgehooks._grading.outboxlog import fold_all, pending_counts

GONE = "gone-host:1:x"


def pending(path: str | os.PathLike[str]) -> int:
    """How many jobs wait in the outbox file at `path` (read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sum(pending_counts(conn).values())
    finally:
        conn.close()


def fold(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """The log folded, so `eval_jobs` holds every pending job; a connection to the file (autocommit)."""
    conn = sqlite3.connect(path, isolation_level=None)
    fold_all(conn)
    return conn


def abandon(path: str | os.PathLike[str], where: str = "1") -> None:
    """Every pending job (matching the SQL condition `where`) as a process that died left it."""
    conn = fold(path)
    conn.execute(f"UPDATE eval_jobs SET owner = ? WHERE {where}", (GONE,))
    conn.close()
