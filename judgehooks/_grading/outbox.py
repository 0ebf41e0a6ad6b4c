"""The outbox: evaluations persisted on the hook path, before the hand-off, so a crash loses none.

A small SQLite file (WAL, synchronous=NORMAL: a committed job survives the process being killed).
A job is filed as one line appended to this process's journal file beside it, and a `done` line
follows once its record is in the store; the upkeep folds the journal into the indexed
`eval_jobs` table (see `journal`). Jobs are owned by the process that
wrote them; a process that starts a dispatcher claims the jobs of owners that are gone (same
host and the pid is dead, or no heartbeat for `stale_after` seconds).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .._base.jsondata import json_text
from .._base.log import log
from .._base.sqlitefile import checked_path, connect_wal
from .journal import Journal, JournalFile, apply, fold_files, held, journal_files, remove, replay, tag_of

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS eval_jobs (
        id TEXT PRIMARY KEY,
        evaluator TEXT NOT NULL,
        spec TEXT,
        context TEXT NOT NULL,
        sample_rate REAL NOT NULL DEFAULT 1.0,
        created_at REAL NOT NULL,
        owner TEXT NOT NULL
    )""",
    # By owner, then evaluator: every look the upkeep takes each second (whose jobs are here; a dead
    # owner's jobs of one evaluator, oldest first; this owner's oldest) is a seek, not a scan of every
    # pending job's row (45 ms a look at 100,000 of them). It replaces the index by evaluator, so a put
    # still updates one index.
    "CREATE INDEX IF NOT EXISTS ix_eval_jobs_owner_evaluator ON eval_jobs (owner, evaluator, created_at)",
    "DROP INDEX IF EXISTS ix_eval_jobs_evaluator",
    """CREATE TABLE IF NOT EXISTS eval_owners (
        owner TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, heartbeat REAL NOT NULL
    )""",
)

HOST = socket.gethostname()
#: the WAL is cut back to this size after a checkpoint, and truncated when it outgrows it
WAL_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Job:
    """One pending evaluation: which evaluator, what to judge, with what sampling probability."""

    id: str
    evaluator: str
    context: dict[str, Any]
    sample_rate: float = 1.0
    spec: str | None = None  # the evaluator's settings as JSON, serialised once per evaluator
    created_at: float = 0.0
    size: int = 0  # bytes of its context as JSON, when read back from the outbox

    def queued(self) -> Job:
        """The job as a queue holds it, beside its `EvalContext`: without the context's dict form, which
        only the outbox write needed (about 40% of a queued job's memory)."""
        return Job(self.id, self.evaluator, QUEUED, self.sample_rate, self.spec, self.created_at, self.size)


#: the context of a queued job (the queue keeps its EvalContext): shared by every one, never written to
QUEUED: dict[str, Any] = {}


def jobs_of(batch: Iterable[tuple[Any, str | None, Any]]) -> dict[str, set[str]]:
    """The job ids behind each record id of a write batch of (record, job id, ...). A job's id is
    its record's id as the hook computed it, but a record may get another: its evaluator's version
    changed between hand-off and grading, or the job was left by a release whose ids held no
    version. Outbox rows are released through this map, so such a job is not regraded forever."""
    found: dict[str, set[str]] = {}
    for record, job_id, *_ in batch:
        if record is not None and job_id is not None:
            found.setdefault(record.id, set()).add(job_id)
    return found


#: the owners' queries, each a seek in the owner index (tests read their plans)
FIRST_OWNER = "SELECT MIN(owner) FROM eval_jobs"
NEXT_OWNER = "SELECT owner FROM eval_jobs WHERE owner > ? ORDER BY owner LIMIT 1"
OLDEST = "SELECT id, created_at FROM eval_jobs WHERE owner = ? AND evaluator = ? ORDER BY created_at"


def claim_sql(dead: int, evaluators: int | None, limit: int | None) -> str:
    """The claim's look at `dead` owners' jobs (of `evaluators` names, or all), oldest first."""
    sql = ("SELECT id, evaluator, spec, context, sample_rate, created_at, LENGTH(CAST(context AS BLOB)) "
           f"FROM eval_jobs WHERE owner IN ({','.join('?' * dead)})")
    if evaluators is not None:
        sql += f" AND evaluator IN ({','.join('?' * evaluators)})"
    return sql + " ORDER BY created_at" + ("" if limit is None else f" LIMIT {int(limit)}")


def _job_owners(conn: sqlite3.Connection) -> list[str]:
    """The distinct owners of the pending jobs, one index seek per owner (a few), not a scan of the
    jobs (which ``SELECT DISTINCT owner`` is, even with the index)."""
    owners: list[str] = []
    row = conn.execute(FIRST_OWNER).fetchone()
    while row is not None and row[0] is not None:
        owners.append(row[0])
        row = conn.execute(NEXT_OWNER, (row[0],)).fetchone()
    return owners


def _new_owner() -> str:
    return f"{HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Outbox:
    """Durable pending jobs in one SQLite file. Thread-safe; every call is short and blocking."""

    def __init__(self, path: str | os.PathLike[str], *, stale_after: float = 30.0, wal_limit: int = WAL_LIMIT) -> None:
        self.path = checked_path(path, "outbox")
        self.stale_after = stale_after
        self.wal_limit = wal_limit
        self.owner = _new_owner()
        self.refused = 0  # jobs the file refused (put): graded from memory, not crash-safe
        self._refusing = 0  # refusals since the file last took a job: one warning per such outage
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        # Checkpoints and scans use their own connection, so they never hold up a put.
        self._maint_lock = threading.Lock()
        self._maint_conn: sqlite3.Connection | None = None
        self._folded: int | None = None  # the data_version when a checkpoint last folded all of the WAL
        self._journal: Journal | None = None
        self._fold_lock = threading.Lock()  # one fold at a time: files are folded in the order written

    def __repr__(self) -> str:
        return f"Outbox({self.path!r})"

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            if self._pid != os.getpid():  # forked: a new owner, new connections
                self._forget_parent()
            # Checkpoints copy the WAL into the database and fsync: never on the hook path.
            # `checkpoint()` runs them from the dispatcher's maintenance task instead.
            conn = connect_wal(self.path, 30.0, autocheckpoint=False, journal_limit=self.wal_limit)
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT OR REPLACE INTO eval_owners VALUES (?, ?, ?, ?)",
                         (self.owner, HOST, self._pid, time.time()))
            self._conn = conn
            if self._journal is None:  # after the owner row: a journal file always has a live owner
                self._journal = Journal(self.path, self.owner)
        return self._conn

    def _journal_now(self) -> Journal:
        if self._journal is None or self._pid != os.getpid():
            with self._lock:
                self._connect()
        assert self._journal is not None
        return self._journal

    def _forget_parent(self) -> None:
        # The parent's connections are not ours, and neither is its owner id: a job filed under it
        # would wait for the parent to die before anyone claimed it.
        self._pid, self.owner = os.getpid(), _new_owner()
        self._conn = self._maint_conn = self._folded = None  # data_version is per connection
        if self._journal is not None:  # the parent's file: its lines are the parent's to fold
            self._journal.forget()
            self._journal = None

    def reset_after_fork(self) -> None:
        """In a forked child: fresh locks (a parent thread may have held them), an owner id of its
        own; connections reopen."""
        self._lock, self._maint_lock, self._fold_lock = threading.Lock(), threading.Lock(), threading.Lock()
        if self._pid != os.getpid():
            self._forget_parent()

    def put(self, job: Job, context: str | None = None, *, run_id: str | None = None) -> None:
        """Persist one job (the hook path): one line appended to this process's journal file.
        Idempotent on the job id (a second put of it is folded into the same `eval_jobs` row).
        `context`: the job's context as JSON text, when the caller has it already (the hook's job
        then holds no context dict, and `run_id` names the run in the log). A file that refuses it
        (a full disk, a folder it may not write in) never fails the hook: the refusal is logged and counted
        (`refused`), and the job is graded from memory, only without surviving a crash. A full disk
        refuses every job: one warning per outage, the rest at debug level, and one line when the
        file takes jobs again."""
        text = json_text(job.context) if context is None else context
        try:
            journal = self._journal_now()  # first: after a fork it gives this process its own owner id
            journal.put((job.id, job.evaluator, job.spec, job.sample_rate, job.created_at or time.time(), self.owner),
                        text)
        except (sqlite3.Error, OSError, ValueError) as exc:
            self.refused += 1
            self._refusing += 1
            say = log.warning if self._refusing == 1 else log.debug
            say("outbox_write_failed", evaluator=job.evaluator, run_id=run_id or job.context.get("run_id"),
                outbox=self.path, error=f"{type(exc).__name__}: {exc}",
                note="graded from memory; further refusals are counted in stats()['outbox_failures'] and logged "
                "at debug level until the file takes a job again")
            return
        if self._refusing:
            log.info("outbox_write_recovered", outbox=self.path, refused=self._refusing)
            self._refusing = 0

    def delete_at_once(self, ids: Sequence[str]) -> bool:
        """`delete`, if that is one short write to this process's open journal now (no SQLite, no
        wait for a lock another thread holds): then an event loop may call it. False: nothing done."""
        journal = self._journal
        return journal is not None and self._pid == os.getpid() and journal.done_at_once(list(ids))

    def delete(self, ids: Sequence[str]) -> None:
        """Forget finished jobs: one `done` line (the next fold removes them from wherever they are)."""
        if ids:
            self._journal_now().done(list(ids))

    def fold(self, *, due: bool = False, idle: bool = False) -> None:
        """Fold this process's journal into `eval_jobs`: the file being written is closed (the
        next put starts a new one), folded in one transaction, and deleted. A put never waits for it.
        `due=True` (the upkeep's): the file being written only once it is due, or with `idle` (its
        writer has nothing queued, in flight or to store) once no job has been put for a moment (`Journal.seal`)."""
        if self._journal is None or self._pid != os.getpid():
            return  # nothing written by this process
        with self._fold_lock:  # a file folded again after a later one was would bring back its jobs
            files = self._journal.seal(due=due, idle=idle)
            if files:
                with self._lock:
                    fold_files(self._connect(), files)
                self._journal.folded(files)

    def _maintenance(self) -> sqlite3.Connection:
        if self._maint_conn is None:
            with self._lock:
                self._connect()  # schema first
            conn = connect_wal(self.path, 30.0, autocheckpoint=False, journal_limit=self.wal_limit)
            conn.execute("PRAGMA busy_timeout=0")  # a truncating checkpoint gives way rather than wait
            self._maint_conn = conn
        return self._maint_conn

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (PASSIVE: never waits for, or blocks, writers); once
        the WAL has outgrown `wal_limit`, also truncate it, if that can be done without waiting.
        Nothing to do when no connection (this process's or another's) has committed since a
        checkpoint that folded all of the WAL: SQLite's `data_version` says so, whatever the file system."""
        with self._maint_lock:
            conn = self._maintenance()
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if version == self._folded:
                return
            busy, frames, folded = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            try:
                if os.path.getsize(f"{self.path}-wal") > self.wal_limit:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    return  # the truncation changed the file: the next round looks again
            except (OSError, sqlite3.OperationalError):  # no WAL file, or busy: the next round tries again
                return
            if not busy and frames == folded:  # all of it, as of `version` at least: a later commit changes it
                self._folded = version

    def wal_size(self) -> int:
        """The WAL file's size in bytes (0 when there is none)."""
        try:
            return os.path.getsize(f"{self.path}-wal")
        except OSError:
            return 0

    def heartbeat(self) -> None:
        """This owner is alive: registered again if a process that took it for dead removed it (its
        journal files would be taken as a dead owner's while it still writes them)."""
        with self._lock:
            self._connect().execute("INSERT OR REPLACE INTO eval_owners VALUES (?, ?, ?, ?)",
                                    (self.owner, HOST, self._pid, time.time()))

    def _owners(self, conn: sqlite3.Connection) -> tuple[list[str], set[str]]:
        """The owners that are gone (with jobs in `eval_jobs`, or registered), and those alive."""
        now = time.time()
        dead, alive = [], {self.owner}
        known = set()
        for owner, host, pid, beat in conn.execute("SELECT owner, host, pid, heartbeat FROM eval_owners"):
            known.add(owner)
            if owner == self.owner:
                continue
            if (host == HOST and not _pid_alive(pid)) or now - beat > self.stale_after:
                dead.append(owner)
            else:
                alive.add(owner)
        orphans = [owner for owner in _job_owners(conn) if owner not in known and owner != self.owner]
        return dead + orphans, alive

    def _dead_owners(self, conn: sqlite3.Connection) -> list[str]:
        return self._owners(conn)[0]

    def _dead_files(self, conn: sqlite3.Connection) -> list[JournalFile]:
        """The journal files of owners that are gone (or were never registered), but a file its
        writer still holds: an owner taken for dead (stalled, or its pid in another namespace) may
        still be writing it."""
        files = journal_files(self.path)
        if not files:
            return []
        alive = {tag_of(owner) for owner in self._owners(conn)[1]}
        return [file for file in files if file.tag not in alive and not held(file)]

    def claim(self, evaluators: Iterable[str] | None = None, limit: int | None = None) -> list[Job]:
        """Take over the pending jobs of owners that are gone (for `evaluators`, or all), oldest first."""
        names = None if evaluators is None else list(evaluators)
        with self._maint_lock:  # a read-only look first: most of the time nobody has died
            maintenance = self._maintenance()
            if not self._dead_owners(maintenance) and not self._dead_files(maintenance):
                return []
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                files = self._dead_files(conn)  # their last jobs first, in this transaction
                for file in files:
                    apply(conn, file)
                dead = self._dead_owners(conn)
                if not dead:
                    conn.execute("COMMIT")
                    remove(files)
                    return []
                marks = ",".join("?" * len(dead))
                rows = conn.execute(claim_sql(len(dead), None if names is None else len(names), limit),
                                    [*dead, *(names or ())]).fetchall()
                conn.executemany("UPDATE eval_jobs SET owner = ? WHERE id = ?", [(self.owner, r[0]) for r in rows])
                remaining = {r[0] for r in conn.execute(
                    f"SELECT DISTINCT owner FROM eval_jobs WHERE owner IN ({marks})", dead)}
                conn.executemany("DELETE FROM eval_owners WHERE owner = ?", [(o,) for o in dead if o not in remaining])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        remove(files)  # after the commit: a crash before this folds them again, which changes nothing
        return [Job(id=r[0], evaluator=r[1], spec=r[2],
                    context=json.loads(r[3]), sample_rate=r[4], created_at=r[5], size=r[6]) for r in rows]

    def oldest_age(self, evaluator: str) -> float | None:
        """Seconds since this owner's oldest pending job of `evaluator` (a dispatcher's are all its
        own) was filed, whether in `eval_jobs` or in a journal file not folded yet. Reads only."""
        journal = self._journal if self._pid == os.getpid() else None
        live: dict[str, Any] = {}  # puts in the unfolded files not done there
        done = replay([] if journal is None else journal.unfolded(), live)
        oldest = min((row[4] for row in live.values() if row[1] == evaluator), default=None)
        with self._lock:
            for job, created in self._connect().execute(OLDEST, (self.owner, evaluator)):
                if job not in done:  # by age: the first not done since is the oldest there
                    oldest = created if oldest is None else min(oldest, created)
                    break
        return None if oldest is None else max(0.0, time.time() - oldest)

    def release(self) -> None:
        """At a clean exit: fold the journal, and leave our unfinished jobs claimable at once by the next process."""
        self.fold()
        with self._lock:
            if self._conn is not None:
                self._conn.execute("UPDATE eval_owners SET heartbeat = 0 WHERE owner = ?", (self.owner,))

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        with self._maint_lock:
            if self._maint_conn is not None:
                self._maint_conn.close()
                self._maint_conn = self._folded = None
