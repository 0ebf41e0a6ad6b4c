"""A judge's health history: its golden-set kappa and canaries, check by check; non-zero when the
last check failed, so CI can gate a judge change on it (`--check` runs one first)."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from .._base.record import EvalRecord
from .._hooks.health import SUFFIX
from .common import call, import_object, label_of, one_line, open_store, table, when
from .options import CommandError
from .terminal import printable_strings, say


def run(args: argparse.Namespace) -> int:
    name = args.evaluator.removesuffix(SUFFIX)
    if args.check is not None:
        evaluator = import_object(args.check, "judge-health: --check")
        if not callable(getattr(evaluator, "check_health", None)):
            raise CommandError(f"judge-health: --check {args.check!r} is a {type(evaluator).__name__}, not a "
                               "judgehooks evaluator", code=2)
        if evaluator.evaluator_name != name:
            raise CommandError(f"judge-health: --check {args.check!r} is evaluator {evaluator.evaluator_name!r}, "
                               f"not {name!r}", code=2)
        try:
            evaluator.check_health()
        except ValueError as exc:
            raise CommandError(f"judge-health: {one_line(exc)}", code=2) from None
    store = open_store(args.store, must_exist=True)
    try:
        found = call(_history, store, name + SUFFIX, args.limit)
    except Exception as exc:
        raise CommandError(f"cannot read store {label_of(args.store)}: {one_line(exc)}") from None
    if not found:
        raise CommandError(f"judge-health: no health check of {name!r} in {label_of(args.store)}: give the "
                           "evaluator golden= and/or canaries= and run it live, or pass --check MODULE:ATTR")
    if args.json:
        say(json.dumps([_row(r) for r in found], indent=2))
    else:
        say(render([printable_strings(_row(r)) for r in found], name))
    return 0 if found[0].status == "passed" else 1


async def _history(store: Any, evaluator: str, limit: int) -> list[EvalRecord]:
    return list(await store.query(evaluator=evaluator, limit=limit))


def _row(record: EvalRecord) -> dict[str, Any]:
    golden, canaries = record.details.get("golden") or {}, record.details.get("canaries") or {}
    return {"time": record.created_at.isoformat(), "version": record.evaluator_version, "status": record.status,
            "kappa": golden.get("kappa"), "agreement": golden.get("agreement"), "golden_graded": golden.get("graded"),
            "canaries_caught": canaries.get("caught"), "canaries": (canaries.get("caught") or 0)
            + len(canaries.get("passed") or []), "canaries_passed": canaries.get("passed") or [],
            "change": (record.details.get("previous") or {}).get("change"),
            "errors": record.details.get("errors"), "reason": record.reason or record.error_message,
            "record_id": record.id}


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def render(rows: list[dict[str, Any]], name: str) -> str:
    """Newest first: one line per check, then the last check's verdict and reason."""
    last = rows[0]
    body = table(["time (UTC)", "version", "status", "kappa", "agreement", "canaries caught", "change", "errors"],
                 [[when_text(r["time"]), r["version"] or "-", r["status"], _num(r["kappa"]), _num(r["agreement"]),
                   f"{r['canaries_caught']}/{r['canaries']}" if r["canaries"] else "-",
                   "-" if r["change"] is None else f"{r['change']:+.2f}", str(r["errors"] or 0)] for r in rows])
    verdict = "healthy" if last["status"] == "passed" else "UNHEALTHY" if last["status"] == "failed" else "not checked"
    return "\n".join([f"judgehooks judge-health: {name}: {len(rows)} check(s), newest first", "", body, "",
                      f"last check: {verdict}: {last['reason'] or '-'}"])


def when_text(iso: str) -> str:
    return when(datetime.fromisoformat(iso))
