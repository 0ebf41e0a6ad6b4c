"""What tests read in an outbox: the pending jobs, wherever they are (the indexed table or a
journal file not folded yet), and a way to leave them as a process that died would."""

from __future__ import annotations

import os
import sqlite3

from judgehooks._grading.journal import apply, fold_files, journal_files, pending_counts

GONE = "gone-host:1:x"
GONE_TAG = "x"  # the journal files of GONE are named by it


def pending(path: str | os.PathLike[str]) -> int:
    """How many jobs wait in the outbox at `path` (read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sum(pending_counts(conn).values())
    finally:
        conn.close()


def connect(path: str | os.PathLike[str], *, keep: bool = True) -> sqlite3.Connection:
    """A connection to the outbox file (autocommit), every journal file folded first, so `eval_jobs`
    holds every pending job. The files stay unless `keep` is false (their writers are done): folding
    one again changes nothing."""
    conn = sqlite3.connect(path, isolation_level=None)
    files = journal_files(str(path))
    if files:
        if keep:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for file in files:
                    apply(conn, file)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        else:
            fold_files(conn, lambda _: files)
    return conn


def abandon(path: str | os.PathLike[str], where: str = "1") -> None:
    """Every pending job (matching the SQL condition `where`) as a process that died left it; the
    processes that wrote them must be done writing."""
    conn = connect(path, keep=False)
    conn.execute(f"UPDATE eval_jobs SET owner = ? WHERE {where}", (GONE,))
    conn.close()
