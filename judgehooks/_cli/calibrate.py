"""Compare a judge with human labels: agreement, kappa, confusion matrix, corrected pass rate."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .._alerts.calibration import acalibrate
from .common import call, label_of, one_line, open_store, table
from .options import CommandError
from .terminal import printable_strings, say


def run(args: argparse.Namespace) -> int:
    store = open_store(args.store, must_exist=True)
    try:
        result = call(acalibrate, args.evaluator, version=args.evaluator_version, store=store, seed=args.seed,
                      resamples=args.resamples)
    except (LookupError, NotImplementedError) as exc:
        raise CommandError(f"calibrate: {one_line(exc)}") from None
    except Exception as exc:
        raise CommandError(f"cannot read store {label_of(args.store)}: {one_line(exc)}") from None
    say(json.dumps(result.to_json(), indent=2) if args.json else render(printable_strings(result.to_json())))
    return 0


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render(data: dict[str, Any]) -> str:
    """The calibration as text: the verdict table, the confusion matrix, the pass rates, the notes."""
    c = data["confusion"]
    ci = data["kappa_ci"]
    lines = [f"judgehooks calibrate: {data['evaluator']}@{data['version']}: {data['n']} labelled record(s)"
             + (f", {data['ties']} left out (reviewers tied)" if data["ties"] else ""), ""]
    rows = [["accuracy", _pct(data["accuracy"]), "judge and people agree"],
            ["true-pass rate", _pct(data["true_pass_rate"]), "of what people pass, the judge passes"],
            ["true-fail rate", _pct(data["true_fail_rate"]), "of what people fail, the judge fails"],
            ["Cohen's kappa", _num(data["kappa"]),
             f"95% CI {ci[0]:.3f} .. {ci[1]:.3f} (bootstrap, seed {data['seed']})" if ci else "no interval"]]
    if data["scored"]:
        rows += [["Spearman's rho", _num(data["spearman"]), f"over {data['scored']} scored record(s)"],
                 ["mean abs. error", _num(data["mae"]), "judge score - people's score"]]
    lines += table(["statistic", "value", ""], rows).splitlines()
    lines += ["", "confusion matrix (rows: judge, columns: people)",
              *table(["", "people pass", "people fail"],
                     [["judge pass", str(c["tp"]), str(c["fp"])], ["judge fail", str(c["fn"]), str(c["tn"])]])
              .splitlines(),
              "", f"pass rate over {data['graded']} graded record(s): raw {_pct(data['raw_pass_rate'])}, "
                  f"corrected for the judge's error (Rogan-Gladen) {_pct(data['corrected_pass_rate'])}"]
    lines += [""] + [f"note: {note}" for note in data["notes"]] if data["notes"] else []
    return "\n".join(lines)
