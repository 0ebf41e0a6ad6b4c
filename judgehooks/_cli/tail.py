"""Print records as they arrive: the last N first, then every new one until Ctrl-C."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from .._base.record import EvalRecord
from ..stores._base import RecordFilter, iter_records
from .common import call, filters_of, label_of, one_line, open_store, read, unmatched, when
from .options import CommandError
from .stats import target
from .terminal import say


def run(args: argparse.Namespace) -> int:
    if args.interval <= 0 or args.lookback < 0:
        raise CommandError(f"tail: --interval must be > 0 and --lookback >= 0, got {args.interval} and "
                           f"{args.lookback}", code=2)
    store = open_store(args.store, must_exist=True)
    where = filters_of(args).replace(status=args.status)
    show = _json_line if args.json else _text_line
    label = label_of(args.store)
    try:
        last = read(label, store.query, **where.keywords(), limit=max(args.lines, 1))
        why = read(label, unmatched, store, where) if not last else None
        if why:  # a filter that can never match: say so, rather than wait (or print nothing) in silence
            say(f"judgehooks: tail: {why}", file=sys.stderr)
        follower = _Follower(store, where, timedelta(seconds=args.lookback))
        if args.follow and last:
            follower.newest = last[0].created_at
            read(label, follower.poll)  # before printing: a record stored after the last N is new
        for record in reversed(last[:args.lines]):
            _emit(show(record))
        down_since: str | None = None  # an outage is said once when it starts, and once when it ends
        for handler in logging.getLogger().handlers:  # ...and not again by the driver, a line per failed poll
            handler.addFilter(_no_driver_chatter)
        while args.follow:
            time.sleep(args.interval)
            try:
                fresh = call(follower.poll)
            except Exception as exc:  # a store outage while following: say so, keep polling, lose nothing
                if down_since is None:
                    down_since = when(datetime.now(UTC))
                    say(f"judgehooks: tail: cannot read store {label}: {one_line(exc)}; retrying every "
                        f"{args.interval:g}s (said once until it answers)", file=sys.stderr)
                continue
            if down_since is not None:
                say(f"judgehooks: tail: store {label} answers again (unreadable since {down_since}); "
                    "nothing stored meanwhile is skipped", file=sys.stderr)
                down_since = None
            for record in fresh:
                _emit(show(record))
        return 0
    except KeyboardInterrupt:  # the way to stop following: not an error
        return 0


def _no_driver_chatter(record: logging.LogRecord) -> bool:
    """While tail follows, a database driver's own log lines (psycopg's pool: a warning per dropped
    connection, per poll) say nothing the outage line does not."""
    return not record.name.startswith("psycopg")


class _Follower:
    """New records since the last poll, oldest first. Polls from the newest time seen minus a
    lookback, and remembers ids inside that window, so nothing is printed twice or skipped."""

    def __init__(self, store: Any, where: RecordFilter, lookback: timedelta) -> None:
        self.store, self.where, self.lookback = store, where, lookback
        self.seen: dict[str, Any] = {}  # id -> created_at, for records inside the lookback window
        self.newest: datetime | None = None

    async def poll(self) -> list[EvalRecord]:
        since = None if self.newest is None else self.newest - self.lookback
        found = [record async for record in iter_records(self.store, **self.where.replace(since=since).keywords())]
        fresh = sorted((r for r in found if r.id not in self.seen), key=lambda r: (r.created_at, r.id))
        for record in fresh:
            self.seen[record.id] = record.created_at
            if self.newest is None or record.created_at > self.newest:
                self.newest = record.created_at
        if self.newest is not None:
            horizon = self.newest - self.lookback
            self.seen = {i: t for i, t in self.seen.items() if t >= horizon}
        return fresh


def _emit(line: str) -> None:
    say(line, one_line=True)  # one record, one line, whatever its text holds


def _json_line(record: EvalRecord) -> str:
    return json.dumps(record.model_dump(mode="json"), ensure_ascii=False)


def _text_line(record: EvalRecord) -> str:
    kind, ident, name = target(record)
    who = "offline" if kind == "offline" else f"{kind}={name or ident}"
    score = "" if record.score is None else f" score={record.score:g}"
    if record.status == "error":
        detail = f"{record.error_type}: {record.error_message or ''}"
    else:
        detail = record.reason or ""
    detail = " ".join(detail.split())
    detail = detail if len(detail) <= 160 else detail[:159] + "…"
    return (f"{when(record.created_at)} {record.status:<7} {record.evaluator} {who}{score} "
            f"id={record.id} run={record.run_id} {detail}").rstrip()
