"""JsonlStore: one JSON object per line, appended, for log shippers (Vector, Fluent Bit, Filebeat).

A batch is appended with one write() to a file opened O_APPEND, under an exclusive advisory lock
(`flock`) that every writer takes, so concurrent writers never interleave inside a line. A crash can
leave at most a torn last line: the next writer to open the file ends it with a newline first,
deciding under that same lock, so a record another process is still copying in is never taken for
a torn line. Readers skip lines that are not whole JSON objects.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Any

import anyio.to_thread

from .._base.feedback import Feedback
from .._base.jsondata import record_json
from .._base.label import Label
from .._base.log import log
from .._base.record import EvalRecord
from .._base.sqlitefile import PRIVATE, append_lines, check_mode, checked_path, create_file
from . import _feedback, _labels
from ._base import BaseStore, RecordFilter


class JsonlStore(BaseStore):
    """Append-only JSON Lines file. ``fsync=True`` also survives power loss (one fsync per batch).
    A new file is created with ``mode``, by default 0600 (it holds users' inputs and answers).

    Appends are not deduplicated (a re-delivered record may appear twice); `query` returns each
    record id once, the first line written.

    Every read parses the whole file: `query`, `iter_records` (once, however many records it
    yields) and `records_by_id` each read it once. Fine for checks, tests and small stores; past
    some ten thousand records, keep them in SQLite and ship the JSONL file for analytics.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False, mode: int = PRIVATE) -> None:
        if str(path) == ":memory:":
            raise ValueError("JsonlStore path must be a file path, not ':memory:' (use MemoryStore)")
        if not isinstance(fsync, bool):
            raise ValueError(f"JsonlStore fsync must be True or False, got {fsync!r}")
        self.path = checked_path(path, "JsonlStore")
        self.fsync = fsync
        self.mode = check_mode(mode, "JsonlStore")
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._tail_checked = False
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"JsonlStore({self.path!r})"

    def _open(self) -> int:
        if self._fd is None or self._pid != os.getpid():
            self._pid = os.getpid()
            create_file(self.path, self.mode)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, self.mode)
            self._tail_checked = False  # this process has yet to end a torn last line left by a crash
        return self._fd

    def _append(self, data: bytes) -> None:
        with self._lock:
            fd = self._open()
            append_lines(fd, data, end_torn_line=not self._tail_checked, fsync=self.fsync)
            self._tail_checked = True

    async def write(self, records: Sequence[EvalRecord]) -> None:
        if records:
            data = "".join(record_json(r) + "\n" for r in records).encode()
            await anyio.to_thread.run_sync(self._append, data)

    def _read(self) -> list[EvalRecord]:
        records: dict[str, EvalRecord] = {}
        for number, line in _labels.text_lines(self.path):
            try:
                record = EvalRecord.model_validate_json(line)
            except ValueError:
                log.warning("jsonl_line_skipped", path=self.path, line=number, reason="not a whole record")
                continue
            records.setdefault(record.id, record)
        return list(records.values())

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        """Newest first. Reads the whole file: fine for checks and tests; ship the file for analytics."""
        records = await anyio.to_thread.run_sync(self._read)
        return where.select(records, limit)

    async def _iter_records(self, where: RecordFilter, page_size: int) -> AsyncIterator[EvalRecord]:
        """One read of the file, however many records are wanted: paging through `query` would read
        the whole file again for every page (quadratic in the file's size)."""
        for record in await self._query(where, None):
            yield record

    async def records_by_id(self, ids: Collection[str]) -> list[EvalRecord]:
        wanted = set(ids)
        if not wanted:
            return []
        return [r for r in await anyio.to_thread.run_sync(self._read) if r.id in wanted]

    @property
    def labels_path(self) -> str:
        """Where human labels are kept: beside the file (evals.jsonl -> evals.labels.jsonl)."""
        return _labels.labels_path(self.path)

    async def write_labels(self, labels: Sequence[Label]) -> None:
        """Appended to `labels_path`; the last label per (record, reviewer) is the one read."""
        if labels:
            await anyio.to_thread.run_sync(_labels.append_labels, self.labels_path, labels, self.mode)

    async def read_labels(self) -> list[Label]:
        return await anyio.to_thread.run_sync(_labels.read_labels_file, self.labels_path)

    @property
    def feedback_path(self) -> str:
        """Where end users' feedback is kept: beside the file (evals.jsonl -> evals.feedback.jsonl)."""
        return _feedback.feedback_path(self.path)

    async def write_feedback(self, items: Sequence[Feedback]) -> None:
        """Appended to `feedback_path`; the last line per feedback id is the one read."""
        if items:
            await anyio.to_thread.run_sync(_feedback.append_feedback, self.feedback_path, items, self.mode)

    async def read_feedback(self, run_ids: Collection[str] | None = None) -> list[Feedback]:
        return await anyio.to_thread.run_sync(_feedback.read_feedback_file, self.feedback_path, run_ids)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                os.close(self._fd)
            self._fd = None

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self.close)

    def __del__(self) -> None:
        fd: Any = getattr(self, "_fd", None)
        if fd is not None and getattr(self, "_pid", None) == os.getpid():
            try:
                os.close(fd)
            except OSError:
                pass
