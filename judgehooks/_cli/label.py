"""Keep a person's verdict on a record beside the judge's, or import many from a JSONL file."""

from __future__ import annotations

import argparse
import json
import sys

from ..stores._human import aimport_labels, alabel
from .common import CommandError, add_store_argument, call, finite, label_of, one_line, open_store
from .terminal import say


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("record_id", nargs="?", metavar="RECORD_ID", help="the record's id (report and tail show it)")
    verdict = parser.add_mutually_exclusive_group()
    verdict.add_argument("--pass", dest="passed", action="store_const", const=True, help="the output passes")
    verdict.add_argument("--fail", dest="passed", action="store_const", const=False, help="the output fails")
    parser.add_argument("--score", type=finite, metavar="N", help="your score, on the evaluator's scale")
    parser.add_argument("--note", metavar="TEXT", help="why (kept with the label)")
    parser.add_argument("--by", metavar="NAME", help="who labels (default: your login name)")
    parser.add_argument("--import", dest="import_file", metavar="FILE",
                        help='labels from JSON lines, each {"record_id"|"run_id", "passed"|"score"} '
                             '(optionally "evaluator", "note", "by"); "-" reads stdin')
    parser.add_argument("--json", action="store_true", help="print the stored label(s) as JSON")


def run(args: argparse.Namespace) -> int:
    if (args.record_id is None) == (args.import_file is None):
        raise CommandError("label: give a RECORD_ID with --pass, --fail or --score, or --import FILE", code=2)
    if args.import_file is not None and (args.passed is not None or args.score is not None or args.note):
        raise CommandError("label: --import takes each verdict from its file, not --pass/--fail/--score/--note",
                           code=2)
    store = open_store(args.store, must_exist=True)
    if args.import_file is not None:
        return _import(args, store)
    try:
        label = call(alabel, args.record_id, passed=args.passed, score=args.score, note=args.note, by=args.by,
                     store=store)
    except (LookupError, ValueError, NotImplementedError) as exc:
        raise CommandError(f"label: {one_line(exc)}") from None
    if args.json:
        say(json.dumps(label.data()))
    else:
        verdict = {True: "pass", False: "fail", None: ""}[label.passed]
        score = "" if label.score is None else f"score {label.score:g}"
        say(f"labelled {label.record_id}: {' '.join(p for p in (verdict, score) if p)} by {label.reviewer}",
            one_line=True)
    return 0


def _import(args: argparse.Namespace, store: object) -> int:
    try:
        if args.import_file == "-":
            lines = sys.stdin.read().splitlines()
        else:
            with open(args.import_file, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
    except OSError as exc:
        raise CommandError(f"label: cannot read {args.import_file!r}: {one_line(exc)}") from None
    try:
        done = call(aimport_labels, lines, store=store, by=args.by)
    except NotImplementedError as exc:
        raise CommandError(f"label: {one_line(exc)}") from None
    for error in done.errors:
        say(f"judgehooks: label: {args.import_file}: {error}", file=sys.stderr, one_line=True)
    if args.json:
        say(json.dumps({"stored": [label.data() for label in done.labels], "errors": done.errors}))
    else:
        say(f"stored {len(done.labels)} label(s) in {label_of(args.store)}"
            + (f"; {len(done.errors)} line(s) not used (above)" if done.errors else ""))
    return 1 if done.errors else 0
