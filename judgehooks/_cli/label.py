"""Keep a person's verdict on a record beside the judge's, or import many from a JSONL file."""

from __future__ import annotations

import argparse
import json
import sys

from ..stores._human import aimport_labels, alabel
from .common import call, label_of, one_line, open_store
from .options import CommandError
from .terminal import say


def run(args: argparse.Namespace) -> int:
    if (args.record_id is None) == (args.from_file is None):
        raise CommandError("label: give a RECORD_ID with --pass, --fail or --score, or --from-file FILE", code=2)
    if args.from_file is not None and (args.passed is not None or args.score is not None or args.note):
        raise CommandError("label: --from-file takes each verdict from its file, not --pass/--fail/--score/--note",
                           code=2)
    store = open_store(args.store, must_exist=True)
    if args.from_file is not None:
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
        if args.from_file == "-":
            lines = sys.stdin.read().splitlines()
        else:
            with open(args.from_file, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
    except OSError as exc:
        raise CommandError(f"label: cannot read {args.from_file!r}: {one_line(exc)}") from None
    try:
        done = call(aimport_labels, lines, store=store, by=args.by)
    except NotImplementedError as exc:
        raise CommandError(f"label: {one_line(exc)}") from None
    for error in done.errors:
        say(f"judgehooks: label: {args.from_file}: {error}", file=sys.stderr, one_line=True)
    if args.json:
        say(json.dumps({"stored": [label.data() for label in done.labels], "errors": done.errors}))
    else:
        say(f"stored {len(done.labels)} label(s) in {label_of(args.store)}"
            + (f"; {len(done.errors)} line(s) not used (above)" if done.errors else ""))
    return 1 if done.errors else 0
