"""The outbox's journal: a job filed on the hook path with one append to a file of this process's own.

Any SQLite write is a transaction: file locks, a page or more into the WAL, about a dozen system
calls. A put cost the hook 0.15-0.25 ms of wall time at 100 runs a second on this VM. Now a put is
one `os.write` of a line to this owner's journal file beside the outbox
(`<outbox>.jobs.<owner tag>.<n>`), and a finished job is a `done` line there. About once a
second the upkeep starts a new file, folds the last one into `eval_jobs` (indexed: claims,
ages) and deletes it. A job put and finished within one file never touches SQLite.

A line is in the file once `os.write` returns, so it survives the process being killed, as a
committed WAL frame did (neither survives the machine losing power). A dead process's files are
folded, in order and in one transaction, by whoever claims its jobs. Files are deleted in
order after the commit, so a crash between the two leaves a file folded again before the files
after it, which changes nothing. The files are read as hostile: a line
that does not parse is logged and skipped, and nothing else is lost.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .._base.log import log
from .._base.sqlitefile import PRIVATE

_MOVE = "INSERT OR IGNORE INTO eval_jobs VALUES (?, ?, ?, ?, ?, ?, ?)"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a symlink planted under a journal file's name is never followed


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
    """The whole lines of a journal file; a symlink or anything but a regular file holds none."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return
    with open(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        for line in file:
            if line.endswith(b"\n"):  # a torn last line: the put that wrote it failed, and said so
                yield line[:-1]


def _entry(line: bytes) -> tuple[str, Any] | None:
    """("put", (row, context)) or ("done", [ids]); None for a line that is neither."""
    try:
        kind, _, rest = line.partition(b"\t")
        if kind == b"D":
            ids = json.loads(rest)
            if isinstance(ids, list) and all(isinstance(i, str) for i in ids):
                return "done", ids
        elif kind == b"P":
            head, _, context = rest.partition(b"\t")
            job, evaluator, spec, rate, created, owner = json.loads(head)
            if (isinstance(job, str) and isinstance(evaluator, str) and isinstance(spec, (str, type(None)))
                    and isinstance(rate, (int, float)) and isinstance(created, (int, float))
                    and isinstance(owner, str)):
                return "put", ((job, evaluator, spec, rate, created, owner), context)
    except (ValueError, TypeError):
        pass
    return None


def entries(path: str, *, puts: bool = True) -> Iterator[tuple[int, str, Any]]:
    """(line number, kind, value) for the puts and dones of a journal file, in order; a line that
    is neither is logged and skipped. `puts=False`: the dones alone, and nothing logged."""
    for number, line in enumerate(_lines(path), 1):
        if not puts and not line.startswith(b"D\t"):
            continue
        entry = _entry(line)
        if entry is None:
            if puts:
                log.warning("outbox_journal_bad_line", file=path, line=number,
                            note="skipped: not a job this library wrote")
            continue
        yield number, *entry


def apply(conn: sqlite3.Connection, file: JournalFile) -> None:
    """Fold one journal file into `eval_jobs`, inside the caller's transaction. A put is live
    unless a `done` of its id follows it in the file. Every id with a `done` is deleted first (a
    row folded from an earlier file), then the live puts are inserted (idempotent on the id). A put
    naming an owner the file is not named after is skipped: a file cannot file jobs for another
    owner (a live one would never claim them)."""
    path = file.path
    last_done: dict[str, int] = {}
    for number, _, ids in entries(path, puts=False):  # the dones alone first: a few ids, not the contexts
        last_done.update((job, number) for job in ids)
    if last_done:
        conn.executemany("DELETE FROM eval_jobs WHERE id = ?", [(job,) for job in last_done])
    live = []
    for number, kind, value in entries(path):
        if kind != "put":
            continue
        (job, evaluator, spec, rate, created, owner), context = value
        if last_done.get(job, 0) > number:
            continue
        if tag_of(owner) != file.tag:
            log.warning("outbox_journal_bad_job", file=path, job_id=job, note="skipped: another owner's job")
            continue
        try:
            text = context.decode()
            json.loads(text)
        except ValueError:
            log.warning("outbox_journal_bad_job", file=path, job_id=job, note="skipped: its context is not JSON")
            continue
        live.append((job, evaluator, spec, text, rate, created, owner))
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
        rows = conn.execute("SELECT id, evaluator, spec FROM eval_jobs")
        jobs: dict[str, tuple[str, str | None]] = {job: (evaluator, spec) for job, evaluator, spec in rows}
    except sqlite3.OperationalError:  # no such table: no job was ever filed here
        jobs = {}
    for file in journal_files(outbox):
        for _, kind, value in entries(file.path):
            if kind == "done":
                for job in value:
                    jobs.pop(job, None)
            else:
                jobs.setdefault(value[0][0], (value[0][1], value[0][2]))
    return jobs


def pending_counts(conn: sqlite3.Connection, outbox: str) -> dict[str, int]:
    """The pending jobs by evaluator (see `pending_jobs`)."""
    counts: dict[str, int] = {}
    for evaluator, _ in pending_jobs(conn, outbox).values():
        counts[evaluator] = counts.get(evaluator, 0) + 1
    return dict(sorted(counts.items()))


class Journal:
    """This owner's journal files: appends from any thread, one line per call."""

    def __init__(self, outbox: str, owner: str) -> None:
        self.outbox, self.owner, self.tag = outbox, owner, tag_of(owner)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._seq = 0
        self._torn = False  # a write failed part-way: the next line starts on a line of its own
        self.sealed: list[JournalFile] = []  # written, closed, not yet folded

    def _path(self, seq: int) -> str:
        return f"{self.outbox}.jobs.{self.tag}.{seq:08d}"

    def _write(self, data: bytes) -> None:
        with self._lock:
            if self._fd is None:
                self._seq += 1
                self._fd = os.open(self._path(self._seq), os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW
                                   | getattr(os, "O_CLOEXEC", 0), PRIVATE)
            if self._torn:
                data = b"\n" + data
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError:
                self._torn = len(view) < len(data)
                raise
            self._torn = False

    def put(self, row: tuple[str, str, str | None, float, float, str], context: str) -> None:
        """One job: (id, evaluator, spec, sample_rate, created_at, owner) and its context as JSON."""
        if "\n" in context or "\t" in context:  # JSON text never holds either raw; anything else is re-encoded
            context = json.dumps(json.loads(context))
        self._write(b"P\t" + json.dumps(row).encode() + b"\t" + context.encode() + b"\n")

    def done(self, ids: list[str]) -> None:
        self._write(b"D\t" + json.dumps(ids).encode() + b"\n")

    def seal(self) -> list[JournalFile]:
        """Close the file being written (the next line starts a new one); every sealed file not yet folded."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
                self.sealed.append(JournalFile(self._path(self._seq), self.tag, self._seq))
            return list(self.sealed)

    def folded(self, files: list[JournalFile]) -> None:
        with self._lock:
            self.sealed = [f for f in self.sealed if f not in files]
        remove(files)

    def forget(self) -> None:
        """In a forked child: let go of the parent's file without its lock (a parent thread may hold it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
