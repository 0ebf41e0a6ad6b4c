"""Grade the jobs that processes left in the outbox when they died or timed out at exit."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from .._evaluators.spec import rebuild
from .._grading.journal import pending_jobs
from .._grading.sessionbook import SessionBook
from .._grading.sessions import graders
from .._judges.base import load_litellm
from .._runtime import runtime
from ..stores._base import store_key
from ..stores._spill import SpillFile, SpillingStore
from ..stores._sqlite import outbox_path_for
from .common import import_module, open_store
from .terminal import say


def _pending_specs(outbox_path: str) -> dict[str, dict[str, Any] | None]:
    conn = sqlite3.connect(Path(outbox_path).absolute().as_uri() + "?mode=ro", uri=True)
    try:
        specs = dict(pending_jobs(conn).values())
    finally:
        conn.close()
    return {name: _loads(spec) for name, spec in specs.items()}


def _loads(spec: str | None) -> Any:
    """A stored spec as JSON data (None: the evaluator was built from user code); one that is not JSON
    (a damaged or hostile file) as its text, which `rebuild` refuses by name."""
    try:
        return json.loads(spec) if spec else None
    except (ValueError, RecursionError):
        return spec


def run(args: argparse.Namespace) -> int:
    store = open_store(args.store, must_exist=False)
    outbox = args.outbox or outbox_path_for(store)
    if not os.path.exists(outbox):
        _import(args.import_)  # a bad --import is an error even when nothing is pending
        say(f"judgehooks resume: no outbox at {outbox!r}: nothing pending")
        return 0

    spilled = SpillFile(outbox).count(store_key(store))  # counted first: re-delivery starts right away
    spill = SpillingStore(store, outbox)  # re-delivers records left waiting while the store was down
    _import(args.import_)  # its evaluators start dispatchers that claim their own jobs
    known = {d.name for d in runtime.drainables()}
    specs = _pending_specs(outbox)
    book = SessionBook(outbox)
    sessions = {name: _loads(spec) for name, spec in book.specs().items()}
    evaluators, held = [], []
    foreign = os.stat(outbox).st_uid
    for name, spec in [*specs.items(), *sessions.items()]:
        if name in known:
            continue
        if foreign != os.getuid():  # whoever can write its specs would choose where this user's keys go
            held.append(name)
            say(f"judgehooks resume: evaluator {name!r}: the outbox {outbox!r} is owned by another user (uid "
                f"{foreign}), so its stored settings are not rebuilt; its pending work stays there. Pass --import "
                "MODULE with the module that constructs the evaluator", file=sys.stderr)
            continue
        unreachable = _unreachable(spec)
        if unreachable:  # rebuilt, its judge would turn every job into an error record and consume it
            held.append(name)
            what = "jobs" if name in specs else "open sessions"
            say(f"judgehooks resume: evaluator {name!r}: {unreachable}; its pending {what} stay in the outbox. "
                f"Set it, or pass --import MODULE with the module that constructs the evaluator (its own key "
                "and callbacks then grade them)", file=sys.stderr)
            continue
        if name in sessions and isinstance(spec, dict) and spec.get("relay"):
            say(f"judgehooks resume: evaluator {name!r} has open session turns for Redis workers (broker=); "
                "they stay in the outbox until the application that constructs it runs again and forwards "
                "them (or pass --import MODULE with that module)", file=sys.stderr)
            continue
        # A session evaluator grades here, on its own clock; a job evaluator in the background.
        background = {} if name in specs else {"run_in_background": False}
        try:
            evaluators.append(rebuild(spec, store=store, outbox=outbox, max_concurrency=args.concurrency, **background))
        except (ValueError, TypeError) as exc:  # NotRebuildable, or settings its class does not take
            what = "jobs" if name in specs else "open sessions"
            say(f"judgehooks resume: evaluator {name!r} has pending {what} but {exc}; pass --import MODULE with "
                f"the module that constructs it (its evaluators then grade their own {what})", file=sys.stderr)
    if not specs and not spilled and not sessions:
        say("judgehooks resume: nothing pending")
        return 0
    if held and not evaluators and not spilled and not (known & {*specs, *sessions}):
        return 1
    deadline = time.monotonic() + args.timeout
    finished = runtime.drain(args.timeout)
    graded_here = {d.name for d in runtime.drainables()} & set(sessions)
    if graded_here:
        finished = _wait_for_sessions(book, graded_here, deadline) and finished
    if spill.redelivered or spill.stats()["spill_pending"]:
        say(f"judgehooks resume: re-delivered {spill.redelivered} spilled record(s), "
            f"{spill.stats()['spill_pending']} still waiting")
    stats = runtime.stats()
    resumed = sum(s.get("resumed", 0) for s in stats.values())
    done = sum(s.get("done", 0) for s in stats.values())
    twice = sum(s.get("duplicates", 0) for s in stats.values())
    stored_already = f", {twice} stored already (not graded again)" if twice else ""
    left = f"; evaluator(s) {', '.join(map(repr, held))} not graded (see above)" if held else ""
    say(f"judgehooks resume: claimed {resumed} pending job(s), graded {done}{stored_already}; "
        f"{'all done' if finished else 'timed out: the rest stay pending'}{left}")
    return 0 if finished and not held else 1


def _unreachable(spec: Any) -> str | None:
    """Why the judge an evaluator rebuilt from `spec` could not be called from here (the key it needs
    is not in this environment: a key passed in code is never stored with the jobs), or None."""
    settings = spec.get("settings", spec) if isinstance(spec, dict) else None
    model = settings.get("model") if isinstance(settings, dict) else None
    if not isinstance(model, str) or not model:
        return None
    try:
        env = load_litellm().validate_environment(model=model, api_base=(settings or {}).get("api_base"))
    except Exception:  # an unknown provider: the judge call says more
        return None
    missing = list(env.get("missing_keys") or [])
    return f"its judge model {model!r} needs {' or '.join(missing)}, not set here" if missing else None


def _import(modules: list[str] | None) -> None:
    for module in modules or ():
        import_module(module, "resume: --import")


def _wait_for_sessions(book: SessionBook, names: set[str], deadline: float) -> bool:
    """Wait while open sessions fall due and their evaluators' clocks grade them (each clock's round
    says when it has none left open); False at the deadline."""
    for grader in graders():
        if grader.name in names and not grader.settled.wait(max(0.0, deadline - time.monotonic())):
            waiting = sum(n for name, n in book.turns_waiting().items() if name in names)
            say(f"judgehooks resume: {waiting} turn(s) of open sessions not graded yet; they stay pending",
                file=sys.stderr)
            return False
    return runtime.drain(max(0.0, deadline - time.monotonic()))
