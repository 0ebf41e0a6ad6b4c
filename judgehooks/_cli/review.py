"""Review records one at a time (routed to review, failed, borderline or sampled) and label them:
pass, fail, score, skip.

The keys are the web app's review page's (`stores._human` holds them), with a score and quit besides."""

from __future__ import annotations

import argparse
import random
import sys
from typing import Any, TextIO

from .._base.label import Label
from .._base.record import EvalRecord
from ..stores._base import iter_records
from ..stores._human import FAIL_KEY, OLD_KEYS, PASS_KEY, QUIT_KEY, SCORE_KEY, SKIP_KEY, default_reviewer
from .common import filters_of, label_of, open_store, read, when
from .options import CommandError
from .terminal import say

QUEUES = ("routed", "failed", "borderline", "sample")
#: how much of a run's input and output is shown, in characters
SHOWN = 1500
HELP = (f"keys: {PASS_KEY} = pass, {FAIL_KEY} = fail, {SCORE_KEY} N = your score N, {SKIP_KEY} = skip, "
        f"{QUIT_KEY} = quit; text after {PASS_KEY}, {FAIL_KEY} or {SCORE_KEY} N is kept as a note (the keys of the "
        "web page's review; the older a = agree with the judge, d = disagree and k = skip still work)")
PROMPT = f"{PASS_KEY}/{FAIL_KEY}/{SCORE_KEY} N/{SKIP_KEY}/{QUIT_KEY}> "


def run(args: argparse.Namespace) -> int:
    kinds = [k.strip() for k in args.queue.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(QUEUES))
    if unknown or not kinds:
        raise CommandError(f"review: --queue takes {', '.join(QUEUES)}, got {args.queue!r}", code=2)
    store = open_store(args.store, must_exist=True)
    label = label_of(args.store)
    reviewer = args.by or default_reviewer()
    records = read(label, _graded, store, filters_of(args).replace(since=args.since).keywords())
    try:
        done = {lb.record_id for lb in read(label, store.read_labels) if lb.reviewer == reviewer}
    except CommandError as exc:
        raise CommandError(f"review: {exc}") from None
    queue = _queue([r for r in records if r.id not in done], kinds, args.margin, args.sample, args.seed)[:args.limit]
    if not queue:
        say(f"nothing to review: no {' or '.join(kinds)} records unlabelled by {reviewer}", one_line=True)
        return 0
    say(f"{len(queue)} record(s) to review as {reviewer}. {HELP}", one_line=True)
    labelled = skipped = 0
    for position, record in enumerate(queue, 1):
        show(record, position, len(queue))
        answer = ask(record, reviewer, sys.stdin)
        if isinstance(answer, str):  # quit
            break
        if answer is None:
            skipped += 1
            continue
        read(label, store.write_labels, [answer])
        labelled += 1
        say(f"  labelled: {_verdict(answer)}", one_line=True)
    say(f"labelled {labelled}, skipped {skipped}, of {len(queue)}")
    return 0


async def _graded(store: Any, filters: dict[str, Any]) -> list[EvalRecord]:
    return [r async for r in iter_records(store, **filters)
            if r.status in ("passed", "failed") and r.rejudge_of is None and r.scope != "health"]


def _queue(records: list[EvalRecord], kinds: list[str], margin: float, sample: int, seed: int) -> list[EvalRecord]:
    """The records to review, newest first within each kind, each once."""
    chosen: dict[str, EvalRecord] = {}
    for kind in kinds:
        if kind == "routed":
            picked = [r for r in records if r.review_reason is not None]
        elif kind == "failed":
            picked = [r for r in records if r.status == "failed"]
        elif kind == "borderline":
            picked = [r for r in records if r.mode == "numeric" and r.score is not None and r.threshold is not None
                      and abs(r.score - r.threshold) <= margin]
        else:
            ordered = sorted(records, key=lambda r: r.id)  # the same store and seed give the same sample
            picked = random.Random(seed).sample(ordered, min(sample, len(ordered)))
        for record in picked:
            chosen.setdefault(record.id, record)
    return list(chosen.values())


def _clip(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + f" … [{len(text) - SHOWN} more characters]"


def show(record: EvalRecord, position: int, total: int, out: TextIO | None = None) -> None:
    """One record for a person: what was asked, answered and concluded, every character printable."""
    score = "" if record.score is None else f", score {record.score:g}" + (
        f" (threshold {record.threshold:g})" if record.threshold is not None else "")
    version = f"@{record.evaluator_version}" if record.evaluator_version else ""
    say(file=out)
    say(f"[{position}/{total}] {record.evaluator}{version}  {when(record.created_at)}  record {record.id}",
        one_line=True, file=out)
    say(f"judge: {record.status.upper()}{score}", one_line=True, file=out)
    if record.review_reason:
        say(f"routed to review: {record.review_reason}", one_line=True, file=out)
    say("reason:", file=out)  # the judge's text, indented like the run's: none of its lines can pass for the screen's
    say(_indent(_clip(record.reason or "(none)")), file=out)
    say("input:", file=out)
    say(_indent(_clip(record.input)), file=out)
    say("output:", file=out)
    say(_indent(_clip(record.output)), file=out)


def _indent(text: str) -> str:
    return "\n".join("  | " + line for line in (text.splitlines() or [""]))


def ask(record: EvalRecord, reviewer: str, stdin: TextIO) -> Label | str | None:
    """Read keys until one is understood: a Label, None (skip) or "quit" (also at the end of input)."""
    while True:
        say(PROMPT, one_line=True)
        line = stdin.readline()
        if not line:
            return "quit"
        key, _, rest = line.strip().partition(" ")
        note = rest.strip() or None
        if key in (PASS_KEY, FAIL_KEY):
            return Label(record_id=record.id, reviewer=reviewer, passed=key == PASS_KEY, note=note)
        if OLD_KEYS.get(key) in ("agree", "disagree"):
            agrees = OLD_KEYS[key] == "agree"
            return Label(record_id=record.id, reviewer=reviewer, passed=record.passed if agrees else not record.passed,
                         note=note)
        if key == SCORE_KEY:
            number, _, note_text = rest.strip().partition(" ")
            try:
                score = float(number)
            except ValueError:
                say(f"  {SCORE_KEY} needs a number, e.g. '{SCORE_KEY} 7': got {number!r}", one_line=True)
                continue
            passed = None if record.threshold is None else score >= record.threshold
            try:
                return Label(record_id=record.id, reviewer=reviewer, passed=passed, score=score,
                             note=note_text.strip() or None)
            except ValueError as exc:
                say(f"  {exc}", one_line=True)
                continue
        if key == SKIP_KEY or OLD_KEYS.get(key) == "skip":
            return None
        if key == QUIT_KEY:
            return "quit"
        say(f"  {HELP}", one_line=True)


def _verdict(label: Label) -> str:
    parts = [{True: "pass", False: "fail", None: ""}[label.passed]]
    if label.score is not None:
        parts.append(f"score {label.score:g}")
    return " ".join(p for p in parts if p)


