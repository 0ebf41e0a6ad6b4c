"""Say whether a Shadow's candidate beats the live agent: wins, losses, ties, win rate, sign test, decision."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .._optimize.shadowreport import ashadow_report
from .common import call, label_of, one_line, open_store, table
from .options import CommandError
from .terminal import printable_strings, say


def run(args: argparse.Namespace) -> int:
    store = open_store(args.store, must_exist=True)
    try:
        report = call(ashadow_report, store, args.name, by=tuple(args.by or ("agent_id", "user_id")),
                      version=args.evaluator_version)
    except (ValueError, LookupError) as exc:
        raise CommandError(f"shadow-report: {one_line(exc)}", code=2) from None
    except Exception as exc:
        raise CommandError(f"cannot read store {label_of(args.store)}: {one_line(exc)}") from None
    data = report.to_json()
    say(json.dumps(data, indent=2) if args.json else render(printable_strings(data)))
    return 0


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _interval(value: list[float] | None) -> str:
    return "-" if not value else f"{100 * value[0]:.1f}% .. {100 * value[1]:.1f}%"


def render(data: dict[str, Any]) -> str:
    """The report as text: the totals, the decision and why, then one table per segment."""
    p = data["p_value"]
    lines = [f"judgehooks shadow-report: {data['name']}@{data['version']}: {data['comparisons']} comparison(s), "
             f"{data['errors']} error(s), {data['skipped']} skipped", ""]
    lines += table(["comparisons", "wins", "losses", "ties", "win rate", "95% CI (Wilson)", "sign test p"],
                   [[str(data["comparisons"]), str(data["wins"]), str(data["losses"]), str(data["ties"]),
                     _pct(data["win_rate"]), _interval(data["interval"]), "-" if p is None else f"{p:.3g}"]]
                   ).splitlines()
    needed = data["needed"]
    more = f" ({needed} more comparison(s) needed)" if data["decision"] == "not enough data" and needed else ""
    lines += ["", f"decision: {data['decision']}{more}", f"why: {data['note']}"]
    if len(data["versions"]) > 1:
        lines += [f"note: other versions of {data['name']} (another candidate, criteria or judge) are not pooled: "
                  f"{', '.join(v for v in data['versions'] if v != data['version'])} (--evaluator-version)"]
    for key, groups in data["segments"].items():
        rows = [[label, str(g["comparisons"]), str(g["wins"]), str(g["losses"]), str(g["ties"]), _pct(g["win_rate"]),
                 _interval(g["interval"])] for label, g in groups.items()]
        if rows:
            lines += ["", f"by {key}", *table([key, "comparisons", "wins", "losses", "ties", "win rate", "95% CI"],
                                               rows).splitlines()]
    return "\n".join(lines)
