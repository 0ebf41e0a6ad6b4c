"""End users' feedback in the stores: the row shape the SQL stores share, and the JSONL file.

Feedback lives beside the records, apart from the reviewers' labels (see `_base/feedback.py` for
why): a ``<table>_feedback`` table (SQLite: ``eval_feedback``) keyed by the feedback id, or a
``<name>.feedback.jsonl`` file beside a JSONL store. A thumb is kept as ``passed``, a number as
``score``, so both can be counted in SQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from .._base.feedback import Feedback
from .._base.log import log
from ._labels import CHUNK, append_lines_to, text_lines

COLUMNS = ("id", "run_id", "user_id", "source", "passed", "score", "comment", "created_at")


def feedback_table(table: str) -> str:
    """The feedback table beside the records table `table` (within PostgreSQL's 63-character names)."""
    return f"{table[:54]}_feedback"


def create_sql(table: str, types: dict[str, str]) -> tuple[str, str]:
    columns = ", ".join(f"{c} {types.get(c, 'TEXT')}" for c in COLUMNS)
    return (f"CREATE TABLE IF NOT EXISTS {table} ({columns}, PRIMARY KEY (id))",
            f"CREATE INDEX IF NOT EXISTS ix_{table}_run ON {table} (run_id)")


def upsert_sql(table: str, mark: str) -> str:
    """A named user's later feedback on a run replaces their earlier one (the id is the same)."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])
    return (f"INSERT INTO {table} ({', '.join(COLUMNS)}) VALUES ({', '.join([mark] * len(COLUMNS))}) "
            f"ON CONFLICT (id) DO UPDATE SET {updates}")


def select_sql(table: str, mark: str, count: int | None) -> str:
    """Every feedback (`count` None), or that on `count` run ids, oldest first."""
    where = "" if count is None else f" WHERE run_id IN ({', '.join([mark] * count)})"
    return f"SELECT {', '.join(COLUMNS)} FROM {table}{where} ORDER BY created_at, id"


def selects(table: str, mark: str, run_ids: Collection[str] | None) -> list[tuple[str, list[str]]]:
    """The queries (sql, parameters) that read the feedback on `run_ids` (None: all)."""
    if run_ids is None:
        return [(select_sql(table, mark, None), [])]
    ids = sorted(set(run_ids))
    return [(select_sql(table, mark, len(chunk)), chunk) for chunk in (ids[i:i + CHUNK]
                                                                        for i in range(0, len(ids), CHUNK))]


def row(item: Feedback, ts: Callable[[datetime], Any]) -> tuple[Any, ...]:
    return (item.id, item.run_id, item.user_id, item.source, item.passed, item.score, item.comment,
            ts(item.created_at))


def from_row(values: Sequence[Any]) -> Feedback:
    data = dict(zip(COLUMNS, values, strict=True))
    passed, score = data.pop("passed"), data.pop("score")
    data["value"] = ("up" if passed else "down") if passed is not None else score
    return Feedback.from_data(data)


def from_rows(rows: Iterable[Sequence[Any]]) -> list[Feedback]:
    """The feedback `rows` hold; a row that is not whole feedback (a database anyone may write) is
    skipped with a warning naming it, as a feedback file's line is."""
    found = []
    for values in rows:
        try:
            found.append(from_row(values))
        except (ValueError, TypeError) as exc:
            log.warning("feedback_row_skipped", id=str(values[0])[:200], reason=str(exc)[:200])
    return found


def sort(items: Collection[Feedback]) -> list[Feedback]:
    return sorted(items, key=lambda f: (f.created_at, f.id))


def feedback_path(path: str) -> str:
    """The feedback file beside a JSONL store's file: evals.jsonl -> evals.feedback.jsonl."""
    stem = path[:-6] if path.endswith(".jsonl") else path
    return f"{stem}.feedback.jsonl"


def append_feedback(path: str, items: Sequence[Feedback], mode: int) -> None:
    """Append feedback as JSON lines, in one locked write."""
    append_lines_to(path, [json.dumps(item.data(), ensure_ascii=False) for item in items], mode)


def read_feedback_file(path: str, run_ids: Collection[str] | None) -> list[Feedback]:
    """The feedback in a feedback file (the last line per id), oldest first; lines that are not
    whole feedback are skipped with a warning naming the line."""
    wanted = None if run_ids is None else set(run_ids)
    found: dict[str, Feedback] = {}
    for number, line in text_lines(path):
        try:
            item = Feedback.from_data(json.loads(line))
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:
            log.warning("feedback_line_skipped", path=path, line=number, reason=str(exc)[:200])
            continue
        if wanted is None or item.run_id in wanted:
            found[item.id] = item
    return sort(found.values())
