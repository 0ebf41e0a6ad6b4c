"""What `judgehooks report` says about dead letters: records the store refused for good, kept in
the spill file (the outbox file by default) instead of blocking the records behind them."""

from __future__ import annotations

import argparse
from typing import Any

from ..stores._deadletter import summary
from ..stores._sqlite import outbox_path_for


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--outbox", metavar="PATH",
                        help="spill/outbox file whose dead letters to show; default beside a SQLite store, "
                             "else $JUDGEHOOKS_OUTBOX or ./judgehooks.outbox.db")


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
