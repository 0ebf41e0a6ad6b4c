"""Human labels in the stores: the row shape the SQL stores share, and the JSONL labels file.

Labels live beside the records they are about: a ``<table>_labels`` table (SQLite: ``eval_labels``)
keyed by (record_id, reviewer), or a ``<name>.labels.jsonl`` file beside a JSONL store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from .._base.label import Label
from .._base.log import log
from .._base.sqlitefile import append_lines, create_file

COLUMNS = ("record_id", "reviewer", "passed", "score", "note", "created_at")
#: the ids a `records_by_id` query asks for at once (SQLite allows 32766 parameters; stay well under)
CHUNK = 500


def labels_table(table: str) -> str:
    """The labels table beside the records table `table` (within PostgreSQL's 63-character names)."""
    return f"{table[:56]}_labels"


def create_sql(table: str, types: dict[str, str]) -> str:
    columns = ", ".join(f"{c} {types.get(c, 'TEXT')}" for c in COLUMNS)
    return f"CREATE TABLE IF NOT EXISTS {table} ({columns}, PRIMARY KEY (record_id, reviewer))"


def upsert_sql(table: str, mark: str) -> str:
    """One label per (record, reviewer): labelling again replaces the reviewer's label."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[2:])
    return (f"INSERT INTO {table} ({', '.join(COLUMNS)}) VALUES ({', '.join([mark] * len(COLUMNS))}) "
            f"ON CONFLICT (record_id, reviewer) DO UPDATE SET {updates}")


def select_sql(table: str) -> str:
    return f"SELECT {', '.join(COLUMNS)} FROM {table} ORDER BY created_at, record_id, reviewer"


def row(label: Label, ts: Callable[[datetime], Any]) -> tuple[Any, ...]:
    return (label.record_id, label.reviewer, label.passed, label.score, label.note, ts(label.created_at))


def from_row(values: Sequence[Any]) -> Label:
    data = dict(zip(COLUMNS, values, strict=True))
    if data["passed"] is not None:
        data["passed"] = bool(data["passed"])
    return Label.from_data(data)


def from_rows(rows: Iterable[Sequence[Any]]) -> list[Label]:
    """The labels `rows` hold; a row that is not a whole label (a database anyone may write) is
    skipped with a warning naming it, as a labels file's line is: it must not hide every other label."""
    found = []
    for values in rows:
        try:
            found.append(from_row(values))
        except (ValueError, TypeError) as exc:
            log.warning("label_row_skipped", record_id=str(values[0])[:200], reviewer=str(values[1])[:200],
                        reason=str(exc)[:200])
    return found


def chunks(ids: Iterable[str]) -> list[list[str]]:
    items = sorted(set(ids))
    return [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]


def labels_path(path: str) -> str:
    """The labels file beside a JSONL store's file: evals.jsonl -> evals.labels.jsonl."""
    stem = path[:-6] if path.endswith(".jsonl") else path
    return f"{stem}.labels.jsonl"


def append_labels(path: str, labels: Sequence[Label], mode: int) -> None:
    """Append labels as JSON lines, in one locked write (a torn last line from a crash is ended first)."""
    append_lines_to(path, [json.dumps(label.data(), ensure_ascii=False) for label in labels], mode)


def append_lines_to(path: str, lines: Sequence[str], mode: int) -> None:
    """Append `lines` to the file `path`, in one locked write (a torn last line from a crash is ended first)."""
    create_file(path, mode)
    data = "".join(line + "\n" for line in lines).encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, mode)
    try:
        append_lines(fd, data, end_torn_line=True)
    finally:
        os.close(fd)


def text_lines(path: str) -> Iterator[tuple[int, str]]:
    """(number, line) for each non-blank line of a text file; none when there is no file."""
    try:
        fh = open(path, encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    with fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                yield number, line


def read_labels_file(path: str) -> list[Label]:
    """The labels in a labels file, the last one per (record, reviewer); lines that are not whole
    labels are skipped with a warning naming the line."""
    found: dict[tuple[str, str], Label] = {}
    for number, line in text_lines(path):
        try:
            label = Label.from_data(json.loads(line))
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:
            log.warning("label_line_skipped", path=path, line=number, reason=str(exc)[:200])
            continue
        found[(label.record_id, label.reviewer)] = label
    return list(found.values())
