"""What tests read in an outbox: the pending jobs, wherever they are (the indexed table or a
journal file not folded yet), and a way to leave them as a process that died would."""

from __future__ import annotations

import os
import sqlite3

from judgehooks._grading.journal import fold_files, journal_files, pending_counts, remove

GONE = "gone-host:1:x"
GONE_TAG = "x"  # the journal files of GONE are named by it


def pending(path: str | os.PathLike[str]) -> int:
    """How many jobs wait in the outbox at `path` (read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sum(pending_counts(conn, str(path)).values())
    finally:
        conn.close()


def fold(path: str | os.PathLike[str], *, keep: bool = True) -> sqlite3.Connection:
    """Every journal file folded, so `eval_jobs` holds every pending job; a connection to the file
    (autocommit). The files stay unless `keep` is false (their writers are done): folding one again
    changes nothing."""
    conn = sqlite3.connect(path, isolation_level=None)
    files = journal_files(str(path))
    fold_files(conn, files)
    if not keep:
        remove(files)
    return conn


def abandon(path: str | os.PathLike[str], where: str = "1") -> None:
    """Every pending job (matching the SQL condition `where`) as a process that died left it; the
    processes that wrote them must be done writing."""
    conn = fold(path, keep=False)
    conn.execute(f"UPDATE eval_jobs SET owner = ? WHERE {where}", (GONE,))
    conn.close()
