"""Grade whole conversations that agno stored (an agno SqliteDb or PostgresDb), once each.

Each session is one `SessionJudge` record (scope "session", its run ids in order). Idempotent: a
session whose last run is already covered by a record of the same evaluator version (its
`evaluator_version`: criteria, scoring, threshold, prompt, judge model) is skipped, so the
command can run again (e.g. nightly) and grade only what is new, or all again under new criteria.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from typing import Any

import anyio

from .._base.record import EvalRecord
from .._base.urls import redact
from .._evaluators.session import SessionJudge
from .._hooks.agnodb import StoredSession, read_sessions, session_owners
from .._runtime import runtime
from ..redact import PII
from ..stores._agno import open_agno_db
from ..stores._sqlite import outbox_path_for
from .common import call, clip, import_object, label_of, store_at
from .options import CommandError
from .terminal import say


def run(args: argparse.Namespace) -> int:
    store = store_at(args.store, must_exist=False)
    try:
        db = open_agno_db(args.agno_db)
    except (ValueError, ImportError) as exc:
        raise CommandError(f"--agno-db {redact(args.agno_db)!r}: {exc}") from None
    try:
        judge = SessionJudge(args.criteria, scoring_strategy=args.scoring_strategy, threshold=args.threshold,
                             name=args.name, model=args.model, api_base=args.api_base,
                             api_key=args.api_key or os.environ.get("JUDGEHOOKS_API_KEY"), timeout=args.timeout,
                             transcript_budget=args.budget, store=store, outbox=outbox_path_for(store),
                             max_concurrency=1, redact=_redactor(args.redact))
    except (ValueError, TypeError) as exc:
        raise CommandError(str(exc), code=2) from None
    covered = _covered(call(store.query, evaluator=judge.evaluator_name, limit=None), judge.evaluator_version,
                       args.criteria)
    try:
        sessions = list(read_sessions(db, agent_id=args.agent_id, team_id=args.team_id, since=args.since,
                                      redact=judge.hook_settings.redact))
    except Exception as exc:  # a missing table, a refused connection: name the db, not a traceback
        raise CommandError(f"cannot read sessions from {redact(args.agno_db)!r}: {clip(str(exc), 300)}") from None
    if not sessions and (args.agent_id or args.team_id):
        _refuse_unknown_owner(db, args)
    todo = [s for s in sessions if s.turns[-1].run.run_id not in covered.get(s.session_id, set())]
    statuses = runtime.call(_grade_all, judge, todo, args.concurrency)
    graded = sum(statuses.values())
    summary = ", ".join(f"{statuses[s]} {s}" for s in ("passed", "failed", "error") if statuses[s])
    say(f"judgehooks grade-sessions: graded {graded} session(s){f' ({summary})' if summary else ''}, skipped "
        f"{len(sessions) - len(todo)} already graded by {judge.evaluator_name!r} version {judge.evaluator_version}; "
        f"records in {label_of(args.store)}")
    if statuses["unstored"]:
        say(f"judgehooks grade-sessions: {statuses['unstored']} record(s) could not be stored", file=sys.stderr)
        return 1
    return 0


def _refuse_unknown_owner(db: Any, args: argparse.Namespace) -> None:
    """--agent-id / --team-id that owns no session in the db: most likely a typo or the other kind,
    so the command fails naming the ids that do (a known id whose sessions --since left out is fine)."""
    teams = args.team_id is not None
    wanted, flag = (args.team_id, "--team-id") if teams else (args.agent_id, "--agent-id")
    try:
        owners, others = session_owners(db, teams=teams), session_owners(db, teams=not teams)
    except Exception as exc:
        raise CommandError(f"cannot read sessions from {redact(args.agno_db)!r}: {clip(str(exc), 300)}") from None
    if wanted in owners:
        return
    kind, other_kind, other_flag = ("team", "agent", "--agent-id") if teams else ("agent", "team", "--team-id")
    where = redact(args.agno_db)
    if wanted in others:
        raise CommandError(f"grade-sessions: {flag} {wanted!r}: {where!r} holds no {kind} sessions of that id, "
                           f"but it is the id of a {other_kind}: pass {other_flag} {wanted}")
    listed = ", ".join(f"{owner!r} ({n} session(s))" for owner, n in sorted(owners.items())[:20])
    more = f" and {len(owners) - 20} more" if len(owners) > 20 else ""
    raise CommandError(f"grade-sessions: {flag} {wanted!r} matches no {kind} session in {where!r}; "
                       + (f"the {kind}s there are: {listed}{more}" if owners else f"it holds no {kind} sessions"))


def _redactor(spec: str | None) -> Any:
    """--redact: None, PII, or package.module:name of a redactor (a function from text to text)."""
    if spec is None:
        return None
    if spec.upper() == "PII":
        return PII
    if ":" not in spec:
        raise CommandError(f"grade-sessions: --redact must be PII or package.module:name, got {spec!r}", code=2)
    return import_object(spec, "grade-sessions: --redact")


def _covered(records: list[EvalRecord], version: str, criteria: str) -> dict[str, set[str]]:
    """Per session, the runs that session records of this evaluator version covered (a record from
    before versions were stored counts when its criteria are these)."""
    found: dict[str, set[str]] = {}
    for record in records:
        same = record.evaluator_version == version if record.evaluator_version is not None \
            else record.criteria == criteria
        if record.scope == "session" and record.session_id is not None and same:
            found.setdefault(record.session_id, set()).update(record.run_ids)
    return found


async def _grade_all(judge: SessionJudge, sessions: list[StoredSession], concurrency: int) -> Counter[str]:
    statuses: Counter[str] = Counter()
    limit = anyio.Semaphore(concurrency)

    async def one(session: StoredSession) -> None:
        async with limit:
            record, error = await judge.grade_session(session.session_id, session.turns)
            statuses["unstored" if error is not None else record.status] += 1

    async with anyio.create_task_group() as tg:
        for session in sessions:
            tg.start_soon(one, session)
    return statuses

