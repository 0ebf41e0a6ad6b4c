"""The job log: background evaluations persisted on the hook path, before the hand-off, so a crash
loses none.

`JobLog` is the seam (put, done, claim, oldest_age): a dispatcher, `judgehooks resume` and the
report see nothing else. `Outbox` is its SQLite implementation (`journal.JournalLog`, the second,
appends puts to a file and folds them into this one): a row of `eval_jobs` in the outbox
file (SQLite, WAL, synchronous=NORMAL: a committed job survives the process being killed), put by
the hook in one short transaction and deleted once its record is stored. Jobs are owned by the
process that put them; a process that starts a dispatcher claims the jobs of owners that are gone
(`outboxfile`'s one liveness rule).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._base.context import EvalContext, context_from_dict
from .._base.jsondata import json_text
from .._base.log import log
from .outboxfile import WAL_LIMIT, OutboxFile, text_of

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
    # By owner, then evaluator: every look the upkeep takes each second (a dead owner's jobs of one
    # evaluator, oldest first; this owner's oldest) is a seek, not a scan of every pending row.
    "CREATE INDEX IF NOT EXISTS ix_eval_jobs_owner_evaluator ON eval_jobs (owner, evaluator, created_at)",
    "DROP INDEX IF EXISTS ix_eval_jobs_evaluator",
)


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


class JobLog(Protocol):
    """Where background jobs wait durably, from the hook's `put` to the `done` after their record is stored."""

    path: str

    def put(self, job: Job, context: str | None = None, *, run_id: str | None = None) -> None:
        """Persist one job (the hook path). Never raises: a refusal is logged and counted."""

    def done(self, ids: Sequence[str]) -> None:
        """Forget finished jobs (their records are stored)."""

    def claim(self, evaluators: Iterable[str] | None = None, limit: int | None = None,
              max_bytes: int | None = None) -> list[Job]:
        """Take over the pending jobs of owners that are gone, oldest first (reading at most about
        `max_bytes` of their contexts; a job's past it is not read: see `Outbox.claim`)."""

    def oldest_age(self, evaluator: str) -> float | None:
        """Seconds since this owner's oldest pending job of `evaluator` was put."""


def jobs_of(batch: Iterable[tuple[Any, str | None]]) -> dict[str, set[str]]:
    """The job ids behind each record id of a write batch of (record, job id). A job's id is its
    record's id as the hook computed it, but a record may get another: its evaluator's version
    changed between hand-off and grading, or the job was left by a release whose ids held no
    version. Rows are released through this map, so such a job is not regraded forever."""
    found: dict[str, set[str]] = {}
    for record, job_id in batch:
        if record is not None and job_id is not None:
            found.setdefault(record.id, set()).add(job_id)
    return found


#: the owners' queries, each a seek in the owner index (tests read their plans)
FIRST_OWNER = "SELECT MIN(owner) FROM eval_jobs"
NEXT_OWNER = "SELECT owner FROM eval_jobs WHERE owner > ? ORDER BY owner LIMIT 1"
OLDEST = "SELECT created_at FROM eval_jobs WHERE owner = ? AND evaluator = ? ORDER BY created_at LIMIT 1"
_PUT = "INSERT OR REPLACE INTO eval_jobs VALUES (?, ?, ?, ?, ?, ?, ?)"


def _loads(text: Any, size: int, max_bytes: int | None) -> Any:
    """A claimed row's context as JSON data, or the error that says it is not JSON or was not read
    (`job_context` raises it)."""
    if text is None:  # see claim_sql
        return ValueError(f"its context of {size} bytes is past the byte budget of {max_bytes} bytes "
                          "(max_queue_bytes): not read")
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        return ValueError(f"its context is not JSON ({type(exc).__name__}: {exc})")


def job_context(job: Job) -> EvalContext:
    """A claimed job's context (a Redis worker's job's too); ValueError or TypeError naming what makes
    the job no job this library wrote (the file, the stream is hostile): a context `context_from_dict`
    refuses, an evaluator name that is not text, a sample rate that is not a number from 0 to 1."""
    data, rate = job.context, job.sample_rate
    if isinstance(data, Exception):
        raise data
    if type(job.evaluator) is not str:
        raise TypeError(f"its evaluator is {type(job.evaluator).__name__}, not text")
    if type(rate) not in (int, float) or not 0 <= rate <= 1:
        raise ValueError(f"its sample_rate {rate!r:.40} is not a number from 0 to 1")
    return context_from_dict(data)


def read_jobs(jobs: Iterable[Job]) -> tuple[list[tuple[Job, EvalContext]], list[tuple[Job, str]]]:
    """Claimed jobs with their contexts, and those that are no job this library wrote, with why."""
    read, unreadable = [], []
    for job in jobs:
        try:
            read.append((job, job_context(job)))
        except Exception as exc:  # whatever the row holds: its error record says what
            unreadable.append((job, f"the job {job.id!r:.80} left in the outbox is not one judgehooks wrote: "
                                    f"{type(exc).__name__}: {exc}"))
    return read, unreadable


def claim_sql(dead: int, evaluators: int | None, limit: int | None, max_bytes: int | None = None) -> str:
    """The claim's look at `dead` owners' jobs (of `evaluators` names, or all), oldest first; a
    context longer than `max_bytes` is not read (NULL)."""
    context = "context" if max_bytes is None else f"CASE WHEN LENGTH(CAST(context AS BLOB)) <= {int(max_bytes)} " \
        "THEN context END"
    sql = (f"SELECT id, evaluator, spec, {context}, sample_rate, created_at, LENGTH(CAST(context AS BLOB)), rowid "
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


def _create(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA:
        conn.execute(statement)


def pending_jobs(conn: sqlite3.Connection) -> dict[str, tuple[str, str | None]]:
    """Every pending job's evaluator and spec, by id, without writing (`judgehooks report` opens
    the file read-only)."""
    try:
        # as bytes: a blob, or text that is not UTF-8 (sqlite3 raises on reading it), is shown with U+FFFD
        rows = conn.execute("SELECT CAST(id AS BLOB), CAST(evaluator AS BLOB), CAST(spec AS BLOB) FROM eval_jobs")
        return {text_of(job): (text_of(name), None if spec is None else text_of(spec)) for job, name, spec in rows}
    except sqlite3.OperationalError:  # no such table: no job was ever put here
        return {}


class Outbox:
    """The job log in the outbox file. Thread-safe; every call is short and blocking."""

    def __init__(self, path: str | os.PathLike[str], *, stale_after: float = 30.0, wal_limit: int = WAL_LIMIT) -> None:
        self.file = OutboxFile(path, stale_after=stale_after, wal_limit=wal_limit)
        self.file.add_schema(_create)
        self.path = self.file.path
        self.refused = 0  # jobs the file refused (put): graded from memory, not crash-safe
        self._refusing = 0  # refusals since the file last took a job: one warning per such outage

    def __repr__(self) -> str:
        return f"Outbox({self.path!r})"

    @property
    def owner(self) -> str:
        return self.file.owner

    def put(self, job: Job, context: str | None = None, *, run_id: str | None = None) -> None:
        """Persist one job: one row, one short transaction. Idempotent on the job id.
        `context`: the job's context as JSON text, when the caller has it already (the hook's job
        then holds no context dict, and `run_id` names the run in the log). A file that refuses it
        (a full disk, a folder it may not write in) never fails the hook: the refusal is logged and
        counted (`refused`), and the job is graded from memory, only without surviving a crash. A
        full disk refuses every job: one warning per outage, the rest at debug level, and one line
        when the file takes jobs again."""
        text = json_text(job.context) if context is None else context
        try:
            with self.file.lock:
                conn = self.file.connect()  # first: in a forked child it gives the child its own owner id
                conn.execute(_PUT, (job.id, job.evaluator, job.spec, text, job.sample_rate,
                                    job.created_at or time.time(), self.file.owner))
        except (sqlite3.Error, OSError, ValueError) as exc:
            self.refused += 1
            self._refusing += 1
            say = log.warning if self._refusing == 1 else log.debug
            say("outbox_write_failed", evaluator=job.evaluator, run_id=run_id or job.context.get("run_id"),
                outbox=self.path, error=f"{type(exc).__name__}: {exc}",
                note="graded from memory; further refusals are counted in stats()['outbox_failures'] and logged "
                "at debug level until the file takes a job again")
            return
        self.recovered()

    def recovered(self) -> None:
        """A job was taken (here, or by a journal beside this file): one line if that ends an outage."""
        if self._refusing:
            log.info("outbox_write_recovered", outbox=self.path, refused=self._refusing)
            self._refusing = 0

    def done(self, ids: Sequence[str]) -> None:
        """Forget finished jobs, in one transaction."""
        if not ids:
            return
        with self.file.transaction() as conn:
            conn.executemany("DELETE FROM eval_jobs WHERE id = ?", [(i,) for i in ids])

    def _dead(self, conn: sqlite3.Connection) -> list[str]:
        """The owners that are gone: registered and dead, or never registered (their rows outlived them)."""
        dead, alive = self.file.owners(conn)
        known = {row[0] for row in conn.execute("SELECT owner FROM eval_owners")}
        return dead + [owner for owner in _job_owners(conn) if owner not in known and owner not in alive]

    def claim(self, evaluators: Iterable[str] | None = None, limit: int | None = None,
              max_bytes: int | None = None) -> list[Job]:
        """Take over the pending jobs of owners that are gone (for `evaluators`, or all), oldest first.
        `max_bytes` (the byte budget): the contexts read stop after about that many bytes, and one
        longer than that is not read at all (the job's error record says so): a row of any size
        (the file is hostile) costs no more memory than the budget."""
        names = None if evaluators is None else list(evaluators)
        with self.file.maint_lock:  # a read-only look first: most of the time nobody has died
            if not self._dead(self.file.maintenance()):
                return []
        with self.file.transaction() as conn:
            dead = self._dead(conn)
            if not dead:
                return []
            marks = ",".join("?" * len(dead))
            rows: list[Any] = []
            read = 0
            for row in conn.execute(claim_sql(len(dead), None if names is None else len(names), limit, max_bytes),
                                    [*dead, *(names or ())]):
                read += 0 if row[3] is None else row[6]
                if rows and max_bytes is not None and read > max_bytes:
                    break
                rows.append(row)
            # by rowid: an id read back with U+FFFD for bytes that are not UTF-8 is not the one stored
            conn.executemany("UPDATE eval_jobs SET owner = ? WHERE rowid = ?", [(self.owner, r[7]) for r in rows])
            remaining = {r[0] for r in conn.execute(
                f"SELECT DISTINCT owner FROM eval_jobs WHERE owner IN ({marks})", dead)}
            conn.executemany("DELETE FROM eval_owners WHERE owner = ?", [(o,) for o in dead if o not in remaining])
        return [Job(id=r[0], evaluator=r[1], spec=r[2],
                    context=_loads(r[3], r[6], max_bytes), sample_rate=r[4], created_at=r[5], size=r[6]) for r in rows]

    def oldest_age(self, evaluator: str) -> float | None:
        """Seconds since this owner's oldest pending job of `evaluator` (a dispatcher's are all its
        own) was put. Reads only."""
        with self.file.lock:
            row = self.file.connect().execute(OLDEST, (self.owner, evaluator)).fetchone()  # the owner after connect()
        return None if row is None else max(0.0, time.time() - row[0])

    def upkeep(self, idle: bool = False) -> None:
        """Once a round (the dispatcher's upkeep): the outbox file's checkpoint and heartbeat. `idle`
        (no unfinished work) matters to a log that folds (`journal.JournalLog`), not to this one."""
        self.file.upkeep()

    def reset_after_fork(self) -> None:
        self.file.reset_after_fork()

    def release(self) -> None:
        """At a clean exit: leave our unfinished jobs claimable at once by the next process."""
        self.file.release()

    def close(self) -> None:
        self.file.close()
