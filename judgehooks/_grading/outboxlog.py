"""The outbox's log: a job filed on the hook path for the price of one appended row.

`eval_jobs` is indexed twice (the job id, unique; the owner): a put there updated three b-trees
and wrote three pages, and a finished job was a delete from all three. Now a put appends a row to
`eval_jobs_log`, which has no index but its sequence number, and a finished job appends a `done`
row. About once a second the upkeep folds the log into `eval_jobs`, oldest rows first, in short
transactions: a job put and finished within one fold never touches `eval_jobs`; one still
pending is inserted there (idempotent on its id), and a later fold removes it.

At every moment each pending job is in one of the two tables, and every committed row survives
the process being killed, as before. The fold is exact whoever runs it, so any process that opens
the file folds every process's rows: a dead one's included.
"""

from __future__ import annotations

import sqlite3

LOG_SCHEMA = """CREATE TABLE IF NOT EXISTS eval_jobs_log (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    done INTEGER NOT NULL,
    evaluator TEXT, spec TEXT, context TEXT, sample_rate REAL, created_at REAL, owner TEXT
)"""
PUT = ("INSERT INTO eval_jobs_log (id, done, evaluator, spec, context, sample_rate, created_at, owner) "
       "VALUES (?, 0, ?, ?, ?, ?, ?, ?)")
DONE = "INSERT INTO eval_jobs_log (id, done) VALUES (?, 1)"
_MOVE = ("INSERT OR IGNORE INTO eval_jobs SELECT id, evaluator, spec, context, sample_rate, created_at, owner "
         "FROM eval_jobs_log WHERE seq IN ({marks}) ORDER BY seq")
_FORGET = "DELETE FROM eval_jobs WHERE id IN (SELECT id FROM eval_jobs_log WHERE done = 1 AND seq BETWEEN ? AND ?)"
_MOST = 500  # sequence numbers in one statement (SQLite allows 999 variables in old builds)

#: log rows folded in one transaction: a put waits at most that long (about a millisecond)
FOLD_ROWS = 128


def fold_some(conn: sqlite3.Connection, limit: int = FOLD_ROWS) -> int | None:
    """Fold the oldest `limit` log rows into `eval_jobs`, in one transaction; the last one's
    sequence number (None: the log was empty).

    Within the rows folded, a put is dead if a `done` row of its id follows it. Every id that has
    a `done` row is deleted from `eval_jobs` first (a row folded earlier, or a duplicate put's),
    then the live puts are inserted: a job put again after it was done stays pending."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute("SELECT seq, id, done FROM eval_jobs_log ORDER BY seq LIMIT ?", (limit,)).fetchall()
        if rows:
            first, last = rows[0][0], rows[-1][0]
            last_done = {job: seq for seq, job, done in rows if done}
            if last_done:
                conn.execute(_FORGET, (first, last))
            live = [seq for seq, job, done in rows if not done and last_done.get(job, 0) < seq]
            for start in range(0, len(live), _MOST):
                part = live[start:start + _MOST]
                conn.execute(_MOVE.format(marks=",".join("?" * len(part))), part)
            conn.execute("DELETE FROM eval_jobs_log WHERE seq BETWEEN ? AND ?", (first, last))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return rows[-1][0] if rows else None


def fold_all(conn: sqlite3.Connection) -> None:
    """Fold every row of the log (a file another process left, before reading `eval_jobs`)."""
    while fold_some(conn) is not None:
        pass


def has_log(conn: sqlite3.Connection) -> bool:
    """Whether the file has a log (a release before it wrote `eval_jobs` only)."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'eval_jobs_log'").fetchone()
    return found is not None


def pending_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """The pending jobs by evaluator, read from both tables without writing (`judgehooks report`
    opens the file read-only). No `eval_jobs` table: none."""
    try:
        jobs = dict(conn.execute("SELECT id, evaluator FROM eval_jobs"))
    except sqlite3.OperationalError:  # no such table: no job was ever filed here
        return {}
    if has_log(conn):
        for job, done, evaluator in conn.execute("SELECT id, done, evaluator FROM eval_jobs_log ORDER BY seq"):
            if done:
                jobs.pop(job, None)
            else:
                jobs.setdefault(job, evaluator)
    counts: dict[str, int] = {}
    for evaluator in jobs.values():
        counts[evaluator] = counts.get(evaluator, 0) + 1
    return dict(sorted(counts.items()))
