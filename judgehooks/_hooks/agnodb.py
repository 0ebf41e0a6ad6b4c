"""Sessions that agno stored (an agno SqliteDb or PostgresDb), read back as turns to grade.

`judgehooks grade-sessions` grades conversations after the fact with the same `SessionJudge` as
the live hook. Each stored run becomes a turn through the same snapshot as a live run; in a team
session, member runs stored apart (with a `parent_run_id`) join their team run's turn, in order.
"""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio.to_thread

from .._base.session import Turn
from .redaction import Redactor
from .session import member_of, members, snapshot_turn


@dataclass(frozen=True, slots=True)
class StoredSession:
    session_id: str
    turns: tuple[Turn, ...]


def read_sessions(db: Any, *, agent_id: str | None = None, team_id: str | None = None,
                  since: datetime | None = None, page_size: int = 100,
                  redact: Redactor | None = None) -> Iterator[StoredSession]:
    """Every agent (or team) session in `db` with at least one run, oldest first, a page at a time;
    each turn redacted by `redact` as the live hook's are (the same snapshot)."""
    from agno.db.base import SessionType

    kind = SessionType.TEAM if team_id is not None else SessionType.AGENT
    start = None if since is None else int(since.timestamp())
    page = 1
    while True:
        found = db.get_sessions(session_type=kind, component_id=team_id or agent_id, start_timestamp=start,
                                limit=page_size, page=page, sort_by="created_at", sort_order="asc")
        for session in found:
            turns = _turns(session, redact)
            if turns:
                yield StoredSession(session_id=str(session.session_id), turns=turns)
        if len(found) < page_size:
            return
        page += 1


def read_session(db: Any, session_id: str, *, redact: Redactor | None = None) -> tuple[Turn, ...]:
    """One session's turns as agno stored them (an agent's session, else a team's), in order and
    redacted by `redact` as the live hook's are; none when agno holds no such session. A sync agno
    db: call it off the event loop."""
    from agno.db.base import SessionType

    for kind in (SessionType.AGENT, SessionType.TEAM):
        session = db.get_session(session_id=session_id, session_type=kind)
        if session is not None and not isinstance(session, dict):
            return _turns(session, redact)
    return ()


async def aread_session(db: Any, session_id: str, *, redact: Redactor | None = None) -> tuple[Turn, ...]:
    """`read_session` for the event loop: an async agno db (`AsyncSqliteDb`, `AsyncPostgresDb`) is
    awaited, a sync one is read on a worker thread."""
    if not inspect.iscoroutinefunction(getattr(db, "get_session", None)):
        return await anyio.to_thread.run_sync(functools.partial(read_session, db, session_id, redact=redact))
    from agno.db.base import SessionType

    for kind in (SessionType.AGENT, SessionType.TEAM):
        session = await db.get_session(session_id=session_id, session_type=kind)
        if session is not None and not isinstance(session, dict):
            return _turns(session, redact)
    return ()


def session_owners(db: Any, *, teams: bool, page_size: int = 1000) -> Counter[str]:
    """The agent ids (or team ids) that own sessions in `db`, each with its number of sessions: what
    an id that matched nothing may have been meant to be. Reads no runs."""
    from agno.db.base import SessionType

    kind, column = (SessionType.TEAM, "team_id") if teams else (SessionType.AGENT, "agent_id")
    owners: Counter[str] = Counter()
    page = 1
    while True:
        rows, _ = db.get_sessions(session_type=kind, limit=page_size, page=page, sort_by="created_at",
                                  sort_order="asc", deserialize=False, include_runs=False)
        owners.update(str(row[column]) for row in rows if row.get(column))
        if len(rows) < page_size:
            return owners
        page += 1


def _turns(session: Any, redact: Redactor | None) -> tuple[Turn, ...]:
    runs = list(getattr(session, "runs", None) or ())
    children: dict[str, list[Any]] = {}
    for run in runs:
        parent = getattr(run, "parent_run_id", None)
        if parent:
            children.setdefault(parent, []).append(run)
    turns = []
    for run in runs:
        if getattr(run, "parent_run_id", None):
            continue
        found = members(run) or tuple(member_of(child) for child in children.get(run.run_id or "", ()))
        turns.append(snapshot_turn(run, user_id=getattr(session, "user_id", None), redact=redact, team_members=found))
    return tuple(turns)
