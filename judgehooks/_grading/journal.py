"""The outbox's journal: a job filed on the hook path with one append to a file of this process's own.

Any SQLite write is a transaction: file locks, a page or more into the WAL, about a dozen system
calls. A put cost the hook 0.15-0.25 ms of wall time at 100 runs a second on this VM. Now a put is
one `os.write` of a line to this owner's journal file beside the outbox
(`<outbox>.jobs.<owner tag>.<n>`), and a finished job is a `done` line there. Once the file is
`FOLD_AGE_S` old or `FOLD_BYTES` long, the upkeep (which looks once a second) starts a new file,
folds the last one into `eval_jobs` (indexed: claims, ages) and deletes it. A job put and finished
within one file never touches SQLite: most jobs, since most finish within seconds.

A line is in the file once `os.write` returns, so it survives the process being killed, as a
committed WAL frame did (neither survives the machine losing power). A dead process's files are
folded, in order and in one transaction, by whoever claims its jobs. Files are deleted in
order after the commit, so a crash between the two leaves a file folded again before the files
after it, which changes nothing. The files are read as hostile: a line
that does not parse is logged and skipped, and nothing else is lost.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .._base.log import log
from .._base.sqlitefile import PRIVATE

_MOVE = "INSERT OR IGNORE INTO eval_jobs VALUES (?, ?, ?, ?, ?, ?, ?)"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a symlink planted under a journal file's name is never followed
#: a longer line is not a job this library wrote (a job's texts are bounded by `max_queue_bytes`)
MAX_LINE = 64 * 1024 * 1024
#: the upkeep folds the file being written once it is this old or this long (`Journal.seal(due=True)`)
FOLD_AGE_S = 5.0
FOLD_BYTES = 16 * 1024 * 1024
#: and, once its writer is idle, when no job has been put for this long (a job put a moment ago may
#: not have reached the writer's queue yet: it counts as work)
FOLD_QUIET_S = 0.5


def tag_of(owner: str) -> str:
    """The part of an owner id a journal file is named by (its random suffix)."""
    return owner.rsplit(":", 1)[-1]


@dataclass(frozen=True, slots=True)
class JournalFile:
    path: str
    tag: str
    seq: int


def journal_files(outbox: str) -> list[JournalFile]:
    """Every journal file of the outbox at `outbox` (every owner's), in each owner's order."""
    folder, base = os.path.split(os.path.abspath(outbox))
    prefix = f"{base}.jobs."
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        if not name.startswith(prefix):
            continue
        tag, _, seq = name[len(prefix):].partition(".")
        if tag and seq.isdigit():
            found.append(JournalFile(os.path.join(folder, name), tag, int(seq)))
    return sorted(found, key=lambda f: (f.tag, f.seq))


def _lines(path: str) -> Iterator[bytes]:
    """The whole lines of a journal file. A symlink, a FIFO or anything but a regular file of this
    user's holds none; a line longer than `MAX_LINE` comes as an empty (bad) line."""
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
            elif line.endswith(b"\n"):  # a torn last line: the put that wrote it failed, and said so
                yield line[:-1]


def _text(value: Any) -> bool:
    """A string SQLite can store (no lone surrogate)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _number(value: Any) -> bool:
    try:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))
    except OverflowError:
        return False


def _entry(line: bytes) -> tuple[str, Any] | None:
    """("put", (row, context)) or ("done", [ids]); None for a line that is neither."""
    try:
        kind, _, rest = line.partition(b"\t")
        if kind == b"D":
            ids = json.loads(rest)
            if isinstance(ids, list) and all(_text(i) for i in ids):
                return "done", ids
        elif kind == b"P":
            head, _, context = rest.partition(b"\t")
            job, evaluator, spec, rate, created, owner = json.loads(head)
            if (_text(job) and _text(evaluator) and (spec is None or _text(spec)) and _number(rate)
                    and _number(created) and _text(owner)):
                return "put", ((job, evaluator, spec, float(rate), float(created), owner), context)
    except Exception:  # any shape at all: nesting past the recursion limit, a number past a float's range
        pass
    return None


def _done_later(line: bytes, number: int, done: Mapping[str, int]) -> bool:
    """Whether `line` puts a job that a `done` line after it finishes, read off the line's start
    (the id, its first field) without parsing the rest; False whenever the id is not plain text."""
    if not line.startswith(b'P\t["'):
        return False
    end = line.find(b'"', 4)
    key = line[4:end]
    if end < 0 or b"\\" in key:  # an escape: only the parser reads it right
        return False
    try:
        return done.get(key.decode(), 0) > number
    except UnicodeDecodeError:
        return False


def entries(path: str, *, puts: bool = True, done: Mapping[str, int] | None = None) -> Iterator[tuple[int, str, Any]]:
    """(line number, kind, value) for the puts and dones of a journal file, in order; a line that
    is neither is logged and skipped. `puts=False`: the dones alone, and nothing logged. `done`
    (job id -> the line of its last `done`): the puts finished later in the file are left out unread."""
    for number, line in enumerate(_lines(path), 1):
        if not puts and not line.startswith(b"D\t"):
            continue
        if done and _done_later(line, number, done):
            continue
        entry = _entry(line)
        if entry is None:
            if puts:
                log.warning("outbox_journal_bad_line", file=path, line=number,
                            note="skipped: not a job this library wrote")
            continue
        yield number, *entry


def _refused(file: JournalFile, value: Any) -> str | None:
    """Why a fold skips a put of `file` (None: it folds it): a file cannot file jobs for another
    owner (a live one would never claim them), and a context must be JSON."""
    (_, _, _, _, _, owner), context = value
    if tag_of(owner) != file.tag:
        return "another owner's job"
    try:
        json.loads(context.decode())
    except ValueError:
        return "its context is not JSON"
    return None


def replay(files: list[JournalFile], jobs: dict[str, Any]) -> set[str]:
    """The puts and dones of `files`, in order, applied to `jobs` (id -> the put's row) as a fold
    would apply them, without writing; the ids done in them. A read: `judgehooks report`, ages."""
    done: set[str] = set()
    for file in files:
        for _, kind, value in entries(file.path):
            if kind == "done":
                done.update(value)
                for job in value:
                    jobs.pop(job, None)
            elif _refused(file, value) is None:
                jobs.setdefault(value[0][0], value[0])
    return done


def apply(conn: sqlite3.Connection, file: JournalFile) -> None:
    """Fold one journal file into `eval_jobs`, inside the caller's transaction. A put is live
    unless a `done` of its id follows it in the file. Every id with a `done` is deleted first (a
    row folded from an earlier file), then the live puts are inserted (idempotent on the id). A put
    `_refused` names is logged and skipped."""
    path = file.path
    last_done: dict[str, int] = {}
    for number, _, ids in entries(path, puts=False):  # the dones alone first: a few ids, not the contexts
        last_done.update((job, number) for job in ids)
    if last_done:
        conn.executemany("DELETE FROM eval_jobs WHERE id = ?", [(job,) for job in last_done])
    live = []
    for number, kind, value in entries(path, done=last_done):  # most puts are done later: not read
        if kind != "put":
            continue
        (job, evaluator, spec, rate, created, owner), context = value
        if last_done.get(job, 0) > number:
            continue
        why = _refused(file, value)
        if why is not None:
            log.warning("outbox_journal_bad_job", file=path, job_id=job, note=f"skipped: {why}")
            continue
        live.append((job, evaluator, spec, context.decode(), rate, created, owner))
        if len(live) >= 512:
            conn.executemany(_MOVE, live)
            live = []
    conn.executemany(_MOVE, live)


def fold_files(conn: sqlite3.Connection, files: list[JournalFile]) -> None:
    """Fold `files` into `eval_jobs` in one transaction (on an autocommit connection)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for file in files:
            apply(conn, file)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def held(file: JournalFile) -> bool:
    """Whether a process is writing `file` now: its writer holds an `flock` on it from the moment the
    file has its name until it is sealed, and the kernel drops the lock when the writer dies, whatever
    its pid or host say. A claimer never folds a held file, so no line is written to a file it deleted."""
    try:
        fd = os.open(file.path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def remove(files: list[JournalFile]) -> None:
    for file in files:
        try:
            os.unlink(file.path)
        except FileNotFoundError:  # another process folded it too, and removed it first
            pass


def pending_jobs(conn: sqlite3.Connection, outbox: str) -> dict[str, tuple[str, str | None]]:
    """Every pending job's evaluator and spec, by id, from `eval_jobs` and every journal file,
    without writing (`judgehooks report` opens the file read-only)."""
    try:
        jobs: dict[str, Any] = {row[0]: row for row in conn.execute("SELECT id, evaluator, spec FROM eval_jobs")}
    except sqlite3.OperationalError:  # no such table: no job was ever filed here
        jobs = {}
    replay(journal_files(outbox), jobs)
    return {job: (row[1], row[2]) for job, row in jobs.items()}


def pending_counts(conn: sqlite3.Connection, outbox: str) -> dict[str, int]:
    """The pending jobs by evaluator (see `pending_jobs`)."""
    counts: dict[str, int] = {}
    for evaluator, _ in pending_jobs(conn, outbox).values():
        counts[evaluator] = counts.get(evaluator, 0) + 1
    return dict(sorted(counts.items()))


class Journal:
    """This owner's journal files: appends from any thread, one line per call."""

    def __init__(self, outbox: str, owner: str) -> None:
        # absolute: a later chdir must not put the files where claimers never look
        self.outbox, self.owner, self.tag = os.path.abspath(outbox), owner, tag_of(owner)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._opened = 0.0  # when the file being written was made (time.monotonic())
        self._last_put = 0.0  # when a job was last put (time.monotonic())
        self._bytes = 0  # and how much has been written to it
        self._seq = 0
        self._torn = False  # a write failed part-way: the next line starts on a line of its own
        self.sealed: list[JournalFile] = []  # written, closed, not yet folded

    def _path(self, seq: int) -> str:
        return f"{self.outbox}.jobs.{self.tag}.{seq:08d}"

    def _create(self) -> int:
        """A new file of this owner's, locked (see `held`) before it has its name, and never one that
        someone else made under that name (it is skipped)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        for _ in range(100):
            self._seq += 1
            path = self._path(self._seq)
            temp = f"{path}.new"  # not a journal file's name: nobody folds it
            try:
                fd = os.open(temp, flags, PRIVATE)
            except FileExistsError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    os.link(temp, path)
                except FileExistsError:
                    os.close(fd)
                    continue
                except OSError:  # a file system without hard links
                    if os.path.lexists(path):
                        os.close(fd)
                        continue
                    os.rename(temp, path)
                    return fd
                return fd
            except BaseException:
                os.close(fd)
                raise
            finally:
                if os.path.lexists(temp):
                    os.unlink(temp)
        raise OSError(f"no free journal file name after {self._path(self._seq)}")

    def _write(self, data: bytes) -> None:
        with self._lock:
            if self._fd is None:
                self._fd = self._create()
                self._opened, self._bytes = time.monotonic(), 0
            self._append(data)

    def _append(self, data: bytes) -> None:
        """All of `data` into the file being written (the caller holds the lock; the file is open)."""
        assert self._fd is not None
        self._bytes += len(data)
        if self._torn:
            data = b"\n" + data
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError:
            self._torn = self._torn or len(view) < len(data)  # part of a line is in the file
            raise
        self._torn = False

    def put(self, row: tuple[str, str, str | None, float, float, str], context: str) -> None:
        """One job: (id, evaluator, spec, sample_rate, created_at, owner) and its context as JSON."""
        if "\n" in context or "\t" in context:  # JSON text never holds either raw; anything else is re-encoded
            context = json.dumps(json.loads(context))
        self._last_put = time.monotonic()
        self._write(b"P\t" + json.dumps(row).encode() + b"\t" + context.encode() + b"\n")

    def done(self, ids: list[str]) -> None:
        self._write(b"D\t" + json.dumps(ids).encode() + b"\n")

    def done_at_once(self, ids: list[str]) -> bool:
        """`done`, but only if that is one short write now: False (nothing written) while another
        thread writes (a put of a long context) or when the next line would start a new file."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._fd is None:
                return False
            self._append(b"D\t" + json.dumps(ids).encode() + b"\n")  # as `done` writes it
            return True
        finally:
            self._lock.release()

    def seal(self, *, due: bool = False, idle: bool = False) -> list[JournalFile]:
        """Close the file being written (the next line starts a new one); every sealed file not yet
        folded. `due=True`: only once it is `FOLD_AGE_S` old or `FOLD_BYTES` long (the jobs put in a
        younger file are mostly done before then, and never reach SQLite), or, with `idle=True` (its
        writer has no work), once no job has been put for `FOLD_QUIET_S`."""
        with self._lock:
            now = time.monotonic()
            if due and self._bytes < FOLD_BYTES and now - self._opened < FOLD_AGE_S and not (
                    idle and now - self._last_put >= FOLD_QUIET_S):
                return list(self.sealed)
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
                self.sealed.append(JournalFile(self._path(self._seq), self.tag, self._seq))
            return list(self.sealed)

    def folded(self, files: list[JournalFile]) -> None:
        with self._lock:
            self.sealed = [f for f in self.sealed if f not in files]
        remove(files)

    def unfolded(self) -> list[JournalFile]:
        """This owner's files not folded yet, oldest first: the sealed ones, then the one being written."""
        with self._lock:
            files = list(self.sealed)
            if self._fd is not None:
                files.append(JournalFile(self._path(self._seq), self.tag, self._seq))
            return files

    def forget(self) -> None:
        """In a forked child: let go of the parent's file without its lock (a parent thread may hold it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        self.seal()  # a put after this starts a new file; this one is folded in its turn
