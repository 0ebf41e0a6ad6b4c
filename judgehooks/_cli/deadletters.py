"""What `judgehooks report` says about the outbox file: dead letters (records the store refused for
good, kept there instead of blocking the records behind them), and background jobs still pending
there (a process that crashed or timed out at exit left them: `judgehooks resume` grades them)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from .._grading.journal import pending_counts
from ..stores._deadletter import summary
from ..stores._sqlite import outbox_path_for


def dead_letters(path: str | None, store: Any) -> dict[str, Any]:
    """The dead letters of the spill file at `path` (default: the store's outbox file)."""
    return summary(path or outbox_path_for(store))


def render(found: dict[str, Any]) -> list[str]:
    """Text lines for the report; none when there are no dead letters."""
    if not found["count"]:
        return []
    lines = ["", f"dead letters: {found['count']} record(s) the store refused for good, kept in {found['file']} "
                 "(table eval_dead_letters); each has an `error` record in the store"]
    lines += [f"  {d['id']}  {d['store']}  after {d['tries']} tries: {' '.join(str(d['error']).split())[:200]}"
              for d in found["latest"]]
    return lines


def pending_jobs(path: str | None, store: Any) -> dict[str, Any]:
    """How many background jobs wait in the outbox at `path` (default: the store's outbox file), by
    evaluator. Reads only; an absent file or table holds none."""
    path = path or outbox_path_for(store)
    found: dict[str, Any] = {"file": path, "count": 0, "by_evaluator": {}}
    if not os.path.exists(path):
        return found
    conn = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True, timeout=5)
    try:
        by_evaluator = pending_counts(conn)  # the journal files' jobs too, read only: nothing is written
    finally:
        conn.close()
    return {**found, "count": sum(by_evaluator.values()), "by_evaluator": by_evaluator}


def render_pending(found: dict[str, Any]) -> list[str]:
    """Text lines for the report; none when no job is pending."""
    if not found["count"]:
        return []
    each = ", ".join(f"{name} {n}" for name, n in found["by_evaluator"].items())
    return ["", f"pending: {found['count']} background job(s) wait in the outbox {found['file']} ({each}); unless "
                "a running process is grading them, one that crashed or timed out at exit left them: grade them "
                f"with `{found['resume']}` (add --import MODULE for evaluators built in code)"]
