"""Pass rate, score statistics, error and skip rates per agent/team and evaluator, and the worst failures."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from ..stores._base import RecordFilter, iter_records
from .common import clip, filters_of, label_of, open_store, read, table, unmatched, when
from .cost import JudgeCost
from .cost import render as render_cost
from .deadletters import dead_letters, pending_jobs, render_pending
from .deadletters import render as render_dead_letters
from .stats import Report
from .terminal import printable_strings, say


def run(args: argparse.Namespace) -> int:
    since, until = args.since, args.until
    store = open_store(args.store, must_exist=True)
    cost = JudgeCost()
    where = filters_of(args).replace(since=since, until=until)
    report = read(label_of(args.store), _collect, store,
                  (Report(worst=args.worst, all_versions=args.all_versions), cost), where)
    empty = read(label_of(args.store), unmatched, store, where) if not report.total.count else None
    payload = {"store": label_of(args.store),
               "since": since.isoformat() if since else None, "until": until.isoformat() if until else None,
               "filters": {"agent": args.agent_id, "team": args.team_id, "evaluator": args.evaluator},
               **report.to_json(), "judge_cost": cost.to_json(), "dead_letters": dead_letters(args.outbox, store),
               "unmatched": empty, "pending_jobs": {**pending_jobs(args.outbox, store), "resume": _resume(args)}}
    say(json.dumps(payload, indent=2) if args.json else render(printable_strings(payload)))
    return 0


async def _collect(store: Any, into: tuple[Report, JudgeCost], where: RecordFilter) -> Report:
    report, cost = into
    async for record in iter_records(store, **where.keywords()):
        report.add(record)
        cost.add(record)
    return report


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.{digits}f}"


WIDTH = 100  # the text report fits a 100-column terminal


def render(payload: dict[str, Any]) -> str:
    """The report as aligned text, at most `WIDTH` columns: per target, a row per evaluator."""
    start = when(datetime.fromisoformat(payload["since"])) if payload["since"] else "the beginning"
    end = when(datetime.fromisoformat(payload["until"])) if payload["until"] else when(datetime.now(UTC))
    lines = [clip(f"judgehooks report: {payload['store']}, {start} .. {end}", WIDTH)]
    if not payload["groups"]:
        why = payload.get("unmatched") or ("no records in this window" + (" matching the filters" if any(
            payload["filters"].values()) else ""))
        return "\n".join([*lines, why, *render_dead_letters(payload["dead_letters"]), *_pending(payload)])
    weighted = any(g["weighted_pass_rate"] != g["pass_rate"] for g in [*payload["groups"], payload["total"]])
    headers = ["evaluator", "n", "pass", "fail", "error", "skip", "pass%", *(["wtd%"] if weighted else []),
               "err%", "score", "range", "ms"]
    groups = [*payload["groups"], {**payload["total"], "kind": "all", "evaluator": "all evaluators"}]
    numbers = [_numbers(g, weighted) for g in groups]
    rest = sum(max(len(h), *(len(row[i]) for row in numbers)) + 2 for i, h in enumerate(headers[1:]))
    name_width = max(12, WIDTH - rest - 2)
    rows = [["  " + _evaluator_cell(g, name_width), *row] for g, row in zip(groups, numbers, strict=True)]
    body = table(headers, rows).splitlines()
    out, heading = [body[0]], None
    for group, line in zip(groups, body[1:], strict=True):
        if _target(group) != heading:
            heading = _target(group)
            out.append(clip(heading, WIDTH))
        out.append(line)
    lines += ["", *out, "",
              "pass% = passed / (passed + failed): errors and skips are not verdicts; err% = errors / n",
              "score = mean numeric score, range = min-max; ms = mean judge latency",
              *(["wtd% = pass% with each record counted 1/sample_rate times"] if weighted else [])]
    lines += version_warnings(payload)
    if payload.get("top_errors"):
        lines += ["", f"most common errors ({len(payload['top_errors'])}):"]
        lines += [f"  {e['count']:>4}x  " + clip(f"{e['error_type']}: {e['message'] or '(no message)'}", WIDTH - 9)
                  for e in payload["top_errors"]]
    if payload["worst_failures"]:
        lines += ["", f"worst failures ({len(payload['worst_failures'])}):"]
        for f in payload["worst_failures"]:
            who = "offline" if f["kind"] == "offline" else f"{f['kind']} {f['name'] or f['id']}"
            score = "" if f["score"] is None else f"score {_num(f['score'])}  "
            lines.append("  " + clip(f"{when(datetime.fromisoformat(f['created_at']))}  {score}{f['evaluator']}  "
                                     f"{who}", WIDTH - 2))
            lines.append(f"    record {f['record_id']}" + (f"  run {f['run_id']}" if f["run_id"] else ""))
            lines.append("    " + clip(f["reason"] or "(no reason given)", WIDTH - 4))
    lines += render_cost(payload.get("judge_cost") or [])
    return "\n".join([*lines, *render_dead_letters(payload["dead_letters"]), *_pending(payload)])


def _pending(payload: dict[str, Any]) -> list[str]:
    return render_pending(payload["pending_jobs"]) if payload.get("pending_jobs") else []


def _resume(args: argparse.Namespace) -> str:
    """The command that grades the pending jobs of this report's store."""
    return ("judgehooks resume" + (f" --store {label_of(args.store)}" if args.store else "")
            + (f" --outbox {args.outbox}" if args.outbox else ""))


def _evaluator_cell(group: dict[str, Any], width: int) -> str:
    """The evaluator's name, and its version when the window holds several (one row each)."""
    version = group.get("evaluator_version")
    if version and len(group.get("versions") or ()) > 1:
        return clip(group["evaluator"], max(1, width - len(version) - 1)) + f"@{version}"
    return clip(group["evaluator"], width)


def version_warnings(payload: dict[str, Any]) -> list[str]:
    """A warning per evaluator whose pass rate would mix versions (none with --all-versions)."""
    if payload.get("all_versions") or not payload.get("mixed_versions"):
        return []
    lines = [""]
    for mixed in payload["mixed_versions"]:
        lines.append(clip(f"warning: {mixed['evaluator']} ({_target(mixed)}) changed in this window: versions "
                          f"{', '.join(mixed['versions'])}", WIDTH))
    lines.append("  its pass rate is shown per version, since one rate over both would mix two judges "
                 "(--all-versions pools them)")
    return lines


def _target(group: dict[str, Any]) -> str:
    if group["kind"] in ("offline", "all"):
        return str(group["kind"])
    name, ident = group["name"], group["id"]
    if group["kind"] == "workflow":  # "workflow <name> · step <step>": its id is the name's parts
        return f"workflow {name}"
    return f"{group['kind']} {name or ident}" + (f" ({ident})" if name and ident and name != ident else "")


def _numbers(group: dict[str, Any], weighted: bool) -> list[str]:
    score = group["score"]
    span = "-" if score["min"] is None else f"{_num(score['min'])}-{_num(score['max'])}"
    return [str(group["count"]), str(group["passed"]), str(group["failed"]), str(group["error"]),
            str(group["skipped"]), _pct(group["pass_rate"]),
            *([_pct(group["weighted_pass_rate"])] if weighted else []), _pct(group["error_rate"]),
            _num(score["mean"], 2), span, _num(group["latency_ms_mean"], 0)]
