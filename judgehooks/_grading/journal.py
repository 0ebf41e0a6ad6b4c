"""`JournalLog`, the job log's second implementation: a put is one `os.write` of a line to this
process's own file beside the outbox (`<outbox>.jobs.<owner tag>.<n>`, 0600), not a SQLite transaction.
A job done while its put is in a file not folded yet is a `done` line there. The dispatcher's upkeep
closes the file being written once it is old or long, or the dispatcher is idle, folds closed files
into the `Outbox` it has (puts minus dones, one transaction; twice changes nothing) and deletes them:
most jobs never touch SQLite. A line is in the file once `os.write` returns: it survives `kill -9`.
Claims fold a dead owner's files (`outboxfile`'s liveness rule), never one its writer still holds
(`flock`). The files are read as hostile: a line that is not a job this library wrote is logged and
skipped; a symlink, a FIFO or another user's file is not read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import sqlite3
import stat
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from .._base.jsondata import json_text
from .._base.log import log
from .._base.sqlitefile import PRIVATE, immediate
from . import outbox as sqlite_log
from .outbox import Job, Outbox

_MOVE = "INSERT OR IGNORE INTO eval_jobs VALUES (?, ?, ?, ?, ?, ?, ?)"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a symlink planted under a journal file's name is never followed
#: a longer line is not a job this library wrote (a job's texts are bounded by `max_queue_bytes`)
MAX_LINE = 64 * 1024 * 1024
#: the upkeep folds the file being written once it is this old or this long
FOLD_AGE_S = 5.0
FOLD_BYTES = 16 * 1024 * 1024
#: or, idle, once no job was put for this long (the hook puts a job before it counts as unfinished work)
FOLD_QUIET_S = 0.5


def tag_of(owner: str) -> str:
    """The part of an owner id a journal file is named by (its random suffix)."""
    return owner.rsplit(":", 1)[-1]


class JournalFile(NamedTuple):
    path: str
    tag: str
    seq: int


def journal_files(outbox: str) -> list[JournalFile]:
    """Every journal file of the outbox at `outbox` (every owner's), in each owner's order. A
    directory under such a name is none (it can be neither read nor removed)."""
    folder, base = os.path.split(os.path.abspath(outbox))
    prefix, found = f"{base}.jobs.", []
    try:
        with os.scandir(folder) as names:
            for entry in names:
                tag, _, seq = entry.name[len(prefix):].partition(".")
                if entry.name.startswith(prefix) and tag and seq.isascii() and seq.isdigit() \
                        and not entry.is_dir(follow_symlinks=False):
                    found.append(JournalFile(entry.path, tag, int(seq)))
    except OSError:
        return []
    return sorted(found, key=lambda f: (f.tag, f.seq))


def _lines(path: str) -> Iterator[bytes]:
    """The whole lines of a journal file (none in a symlink, FIFO, other user's file); a line longer than
    `MAX_LINE` comes as an empty (bad) line."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)  # a FIFO never blocks the reader
    except OSError:
        return
    with open(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return
        while line := file.readline(MAX_LINE + 1):
            if len(line) > MAX_LINE:
                while line and not line.endswith(b"\n"):  # the rest of it, a chunk at a time
                    line = file.readline(MAX_LINE + 1)
                yield b""
            elif line.endswith(b"\n"):  # a torn last line: the put that wrote it failed, and fell back
                yield line[:-1]


def _entry(line: bytes) -> tuple[str, Any] | None:
    """("put", (row, context)) or ("done", [ids]); None for a line that is neither."""
    try:  # any shape at all raises here: nesting past the recursion limit, a lone surrogate, 1e999
        kind, _, rest = line.partition(b"\t")
        if kind == b"D":
            ids = json.loads(rest)
            if isinstance(ids, list) and all(isinstance(i, str) and i.encode() for i in ids):
                return "done", ids
        elif kind == b"P":
            head, _, context = rest.partition(b"\t")
            job, evaluator, spec, rate, created, owner = json.loads(head)
            texts = (job, evaluator, owner) if spec is None else (job, evaluator, owner, spec)
            if all(isinstance(t, str) and t.encode() for t in texts) and all(
                    type(n) in (int, float) and math.isfinite(n) for n in (rate, created)):
                return "put", ((job, evaluator, spec, float(rate), float(created), owner), context)
    except Exception:
        pass
    return None


def _fold(file: JournalFile) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
    """What folding `file` does: the ids its dones delete (rows folded from earlier files), then the
    rows (`eval_jobs`' columns) of its puts that no later `done` finishes. A line that is neither, a
    put whose context is not JSON and one for another owner (a live one would never claim it) are
    logged and skipped. The file is read twice, its dones then its puts as they come: memory holds
    one line, whatever its size."""
    last_done: dict[str, int] = {}
    for number, line in enumerate(_lines(file.path), 1):
        done = _entry(line) if line.startswith(b"D\t") else None
        if done is not None:
            last_done.update((job, number) for job in done[1])

    def live() -> Iterator[tuple[Any, ...]]:
        for number, line in enumerate(_lines(file.path), 1):
            entry = _entry(line)
            if entry is None:
                log.warning("outbox_journal_bad_line", file=file.path, line=number,
                            note="skipped: not a job this library wrote")
                continue
            kind, value = entry
            if kind == "done" or last_done.get(value[0][0], 0) > number:  # a done, or a put done later
                continue
            (job, evaluator, spec, rate, created, owner), context = value
            try:
                context = context.decode()
                json.loads(context)
                why = None if tag_of(owner) == file.tag else "another owner's job"
            except (ValueError, RecursionError):  # nested past Python's stack: unreadable, not a fold that stops
                why = "its context is not JSON"
            if why is not None:
                log.warning("outbox_journal_bad_job", file=file.path, job_id=job, note=f"skipped: {why}")
            else:
                yield job, evaluator, spec, context, rate, created, owner
    return list(last_done), live()


def apply(conn: sqlite3.Connection, file: JournalFile) -> None:
    """Fold one journal file into `eval_jobs` (`_fold`), inside the caller's transaction; idempotent on the id."""
    done, live = _fold(file)
    conn.executemany("DELETE FROM eval_jobs WHERE id = ?", [(job,) for job in done])
    conn.executemany(_MOVE, live)


def fold_files(conn: sqlite3.Connection, pick: Callable[[sqlite3.Connection], list[JournalFile]]) -> None:
    """Fold the files `pick(conn)` names (inside the transaction) into `eval_jobs` in one transaction
    (on an autocommit connection), then delete them in order."""
    with immediate(conn):
        files = pick(conn)
        for file in files:
            apply(conn, file)
    for file in files:  # in order: a crash part-way leaves later files, folded again idempotently
        with contextlib.suppress(FileNotFoundError):  # another process folded it too, and removed it first
            os.unlink(file.path)


def held(file: JournalFile) -> bool:
    """Whether a process writes `file` now: its writer `flock`s it from before it has its name until it is
    closed, and the kernel drops the lock when the writer dies, whatever its pid or host say."""
    try:
        fd = os.open(file.path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError as exc:
        return isinstance(exc, BlockingIOError)
    finally:
        os.close(fd)


def replay(files: Iterable[JournalFile], jobs: dict[str, tuple[str, str | None]]) -> None:
    """The puts and dones of `files` applied to `jobs` (id -> evaluator, spec) as a fold would, in memory."""
    for file in files:
        done, live = _fold(file)
        for job in done:
            jobs.pop(job, None)
        for job, evaluator, spec, *_ in live:
            jobs.setdefault(job, (evaluator, spec))


def pending_jobs(conn: sqlite3.Connection) -> dict[str, tuple[str, str | None]]:
    """`outbox.pending_jobs` and the jobs in every journal file beside the file `conn` has open. Reads only."""
    jobs = sqlite_log.pending_jobs(conn)
    path = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
    if path:
        replay(journal_files(path), jobs)
    return jobs


def pending_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """The pending jobs by evaluator (see `pending_jobs`)."""
    return dict(sorted(Counter(evaluator for evaluator, _ in pending_jobs(conn).values()).items()))


class JournalLog:
    """The job log in this process's journal files, folded into the `outbox` it has. Thread-safe."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox, self.path = outbox, outbox.path
        self._where = os.path.abspath(outbox.path)  # a later chdir must not move the files
        # the file being written and what the unfolded files hold; one fold at a time (files in order)
        self._lock, self._fold_lock = threading.Lock(), threading.Lock()
        self._fd: int | None = None
        self._forget_parent()
        self._failing = 0  # puts the journal could not take since it last took one

    def __repr__(self) -> str:
        return f"JournalLog({self.path!r})"

    @property
    def refused(self) -> int:
        return self.outbox.refused

    def _forget_parent(self) -> None:
        """A fresh start (in a forked child: the parent's files are the parent's to fold, under its owner)."""
        fd, self._fd = self._fd, None
        if fd is not None:  # never keep the parent's file locked: it would never be claimed
            os.close(fd)
        self._pid, self._seq, self._tag, self._bytes, self._torn = os.getpid(), 0, "", 0, False  # torn: see _append
        self._opened = self._last_put = 0.0  # time.monotonic() of the file's start, and of the last put
        self._sealed: list[JournalFile] = []  # closed, not folded yet
        self._live: dict[str, tuple[int, str, float]] = {}  # put in an unfolded file, not done: seq, evaluator, created

    def _name(self, seq: int) -> str:
        return f"{self._where}.jobs.{self._tag}.{seq:08d}"

    def _create(self) -> int:
        """A new file of this owner's, locked (see `held`) before it has its name; never one made by someone else."""
        with self.outbox.file.lock:  # a registered owner first (after a fork: a new one)
            self.outbox.file.connect()
        self._tag = tag_of(self.outbox.owner)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        for _ in range(100):
            self._seq += 1
            path = self._name(self._seq)
            temp = f"{path}.new"  # not a journal file's name: nobody folds it
            try:
                fd = os.open(temp, flags, PRIVATE)
            except FileExistsError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    os.link(temp, path)  # never over a file someone else made: a file system without links fails
                except FileExistsError:
                    os.close(fd)
                    continue
                self._opened, self._bytes = time.monotonic(), 0
                return fd
            except BaseException:
                os.close(fd)
                raise
            finally:
                if os.path.lexists(temp):
                    os.unlink(temp)
        raise OSError(f"no free journal file name after {self._name(self._seq)}")

    def _seal(self) -> None:  # the file being written closed (the caller holds the lock): the next line starts one
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._sealed.append(JournalFile(self._name(self._seq), self._tag, self._seq))

    def _ready(self) -> int:  # the file being written, opened if need be (the caller holds the lock)
        if self._pid != os.getpid():
            self._forget_parent()
        if self._fd is None:
            self._fd = self._create()
        return self._seq

    def _append(self, data: bytes) -> int:
        """All of `data` into the file being written (the caller holds the lock); its seq."""
        seq, fd = self._ready(), self._fd or 0
        self._bytes += len(data)
        if self._torn:
            data = b"\n" + data
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            self._torn = self._torn or len(view) < len(data)  # part of a line is in the file
            raise
        self._torn = False
        return seq

    def put(self, job: Job, context: str | None = None, *, run_id: str | None = None) -> None:
        """Persist one job (the hook path): one line appended to this process's journal file. A file
        that cannot take it (a full disk, a folder it may not write in) hands it to the SQLite put,
        which refuses and counts it as `Outbox.put` does if it cannot take it either: never raises."""
        text = json_text(job.context) if context is None else context
        created = job.created_at or time.time()
        try:
            if "\n" in text or "\t" in text:  # JSON text never holds either raw; anything else is re-encoded
                text = json.dumps(json.loads(text))
            body = text.encode()
            with self._lock:
                self._ready()  # first: after a fork it gives this process its own owner id
                row = (job.id, job.evaluator, job.spec, job.sample_rate, created, self.outbox.owner)
                self._live[job.id] = (self._append(b"P\t" + json.dumps(row).encode() + b"\t" + body + b"\n"),
                                      job.evaluator, created)
                self._last_put = time.monotonic()
        except (OSError, ValueError) as exc:
            self._failing += 1
            (log.warning if self._failing == 1 else log.debug)(
                "outbox_journal_write_failed", outbox=self.path, error=f"{type(exc).__name__}: {exc}",
                note="the job goes to the outbox file instead")
            self.outbox.put(job, text, run_id=run_id)
            return
        if self._failing:  # the outage is over: the next one warns again
            self._failing = 0
            self.outbox.recovered()

    def done(self, ids: Sequence[str]) -> None:
        """Forget finished jobs: a `done` line for those put in a file not folded yet, `Outbox.done` for the rest."""
        failed = False
        with self._lock:
            rest = [job for job in ids if job not in self._live]
            here = [job for job in ids if self._live.pop(job, None) is not None]
            if here:
                try:
                    self._append(b"D\t" + json.dumps(here).encode() + b"\n")
                except OSError:
                    failed = True
        if failed:  # their puts go to `eval_jobs` now, and they go from there with the rest
            self.fold()
            rest = list(ids)
        if rest:
            self.outbox.done(rest)

    def fold(self, *, due: bool = False, idle: bool = False) -> None:
        """Fold this process's files into `eval_jobs` (one transaction) and delete them; the file being
        written is closed first, with `due=True` (the upkeep's) only once it is `FOLD_AGE_S` old or
        `FOLD_BYTES` long, or, `idle` (no unfinished work), no job was put for `FOLD_QUIET_S`."""
        if self._pid != os.getpid():
            return  # nothing written by this process
        with self._fold_lock:  # a file folded again after a later one was would bring back its jobs
            with self._lock:
                now = time.monotonic()
                if not (due and self._bytes < FOLD_BYTES and now - self._opened < FOLD_AGE_S
                        and not (idle and now - self._last_put >= FOLD_QUIET_S)):
                    self._seal()
                files = list(self._sealed)
            if not files:
                return
            with self.outbox.file.lock:
                fold_files(self.outbox.file.connect(), lambda _: files)
            seqs = {file.seq for file in files}
            with self._lock:
                self._sealed = [file for file in self._sealed if file not in files]
                for job in [job for job, (seq, _, _) in self._live.items() if seq in seqs]:
                    del self._live[job]  # in eval_jobs now: its done goes there

    def upkeep(self, idle: bool = False) -> None:
        """Once a round of the dispatcher's upkeep: the journal folded if due, the outbox file's upkeep."""
        try:
            self.fold(due=True, idle=idle)
        finally:  # whatever failed above: a process that stops beating is taken for dead
            self.outbox.upkeep()

    def _dead_files(self, conn: sqlite3.Connection) -> list[JournalFile]:
        """The journal files of owners that are gone (or never registered), but one its writer still
        holds: an owner taken for dead (stalled, its pid in another namespace) may still write it."""
        files = journal_files(self._where)
        alive = {tag_of(owner) for owner in self.outbox.file.owners(conn)[1]}
        return [file for file in files if file.tag not in alive and not held(file)]

    def claim(self, evaluators: Iterable[str] | None = None, limit: int | None = None,
              max_bytes: int | None = None) -> list[Job]:
        """Take over the pending jobs of owners that are gone, oldest first: their journal files
        folded first (in one transaction, deleted after it), then `Outbox.claim`."""
        with self.outbox.file.maint_lock:  # a read-only look first: most of the time nobody has died
            dead = self._dead_files(self.outbox.file.maintenance())
        if dead:
            with self.outbox.file.lock:
                fold_files(self.outbox.file.connect(), self._dead_files)  # chosen again, in the transaction
        return self.outbox.claim(evaluators, limit, max_bytes)

    def oldest_age(self, evaluator: str) -> float | None:
        """Seconds since this owner's oldest pending job of `evaluator` was put, folded or not. Reads only."""
        with self._lock:
            oldest = min((created for _, name, created in self._live.values() if name == evaluator), default=None)
        folded = self.outbox.oldest_age(evaluator)
        mine = None if oldest is None else max(0.0, time.time() - oldest)
        return max(mine or 0.0, folded or 0.0) if mine is not None or folded is not None else None

    def reset_after_fork(self) -> None:
        """In a forked child: fresh locks (a parent thread may have held them), an owner and files of its own."""
        self._lock, self._fold_lock = threading.Lock(), threading.Lock()
        self.outbox.reset_after_fork()
        if self._pid != os.getpid():
            self._forget_parent()

    def release(self) -> None:
        """At a clean exit: the journal folded, and our unfinished jobs claimable at once by the next process."""
        try:
            self.fold()
        finally:
            self.outbox.release()

    def close(self) -> None:
        with self._lock:  # a put after this starts a new file; this one is folded in its turn
            if self._pid == os.getpid():
                self._seal()
        self.outbox.close()
