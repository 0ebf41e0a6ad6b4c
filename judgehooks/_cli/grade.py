"""Grade a JSONL file of input/output[/expected] cases offline, in bounded chunks, into a store."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._base.record import EvalRecord
from .._evaluators.llm import AgentAsJudgeEval
from ..exceptions import StoreError
from ..stores._base import BaseStore, RecordFilter, Store
from .cases import CaseError, read_cases
from .common import check_store, clip, import_object, label_of, store_at
from .options import CommandError
from .terminal import say

# Judge settings a code-defined --import-evaluator already has; giving them too is a contradiction, not an override.
_JUDGE_FLAGS = ("criteria", "model", "api_base", "api_key", "scoring_strategy", "threshold", "name",
                "concurrency", "timeout", "retries", "store")
_FLAG_OF = {"max_concurrency": "--concurrency", "scoring_strategy": "--scoring-strategy", "threshold": "--threshold",
            "criteria": "--criteria", "timeout": "--timeout", "retries": "--retries", "name": "--name",
            "model": "--model"}
_MAX_SHOWN = 20


def run(args: argparse.Namespace) -> int:
    for option, value in (("--chunk-size", args.chunk_size), ("--max-line-bytes", args.max_line_bytes)):
        if value < 1:
            raise CommandError(f"grade: {option} must be >= 1, got {value}", code=2)
    total = _validate(args.cases, args.max_line_bytes)
    with _progress(args.progress, total) as advance:
        evaluator, store_url = _evaluator(args, advance)
        summary = _grade(evaluator, args.cases, total, args.chunk_size, advance, args.max_line_bytes)
    summary = {"cases_file": args.cases, "store": store_url, "evaluator": evaluator.evaluator, **summary}
    say(json.dumps(summary, indent=2) if args.json else _render(summary))
    every_case_errored = summary["cases"] > 0 and summary["error"] == summary["cases"]
    return 1 if summary["not_stored"] or summary["not_graded"] or every_case_errored else 0


def _validate(path: str, max_line_bytes: int) -> int:
    """Check every line before grading any: the number of cases, or CommandError listing bad lines."""
    problems: list[CaseError] = []
    cases = bad = 0
    try:
        for _, case in read_cases(path, max_line_bytes):
            if isinstance(case, CaseError):
                bad += 1
                if len(problems) < _MAX_SHOWN:
                    problems.append(case)
            else:
                cases += 1
    except OSError as exc:
        raise CommandError(f"grade: cannot read {path}: {exc.strerror or exc}", code=2) from None
    if problems:
        more = f"\n... and {bad - len(problems)} more bad line(s)" if bad > len(problems) else ""
        raise CommandError("grade: " + "\n".join(map(str, problems)) + more
                           + f"\n{bad} bad line(s) in {path}: nothing graded", code=2)
    if not cases:
        raise CommandError(f"grade: {path} has no cases: nothing to grade", code=2)
    return cases


def _evaluator(args: argparse.Namespace, advance: Callable[[int], None]) -> tuple[AgentAsJudgeEval, str]:
    if args.import_evaluator:
        given = [f"--{f.replace('_', '-')}" for f in _JUDGE_FLAGS if getattr(args, f) is not None]
        if given:
            raise CommandError(f"grade: {', '.join(given)} cannot be combined with --import-evaluator, which "
                               "brings its own judge settings and store", code=2)
        evaluator = _load(args.import_evaluator)
        check_store(evaluator.store, f"{evaluator.store!r} of {args.import_evaluator}")
        return evaluator, repr(evaluator.store)
    if not args.criteria:
        raise CommandError("grade: --criteria is required (or --import-evaluator MODULE:ATTR)", code=2)
    if args.threshold is not None and args.scoring_strategy != "numeric":
        raise CommandError("grade: --threshold applies to --scoring-strategy numeric only", code=2)
    store = store_at(args.store, must_exist=False)
    try:
        evaluator = AgentAsJudgeEval(
            criteria=args.criteria, scoring_strategy=args.scoring_strategy or "binary",
            threshold=7 if args.threshold is None else args.threshold, name=args.name, model=args.model,
            api_base=args.api_base, api_key=args.api_key or os.environ.get("JUDGEHOOKS_API_KEY"),
            timeout=60.0 if args.timeout is None else args.timeout, retries=2 if args.retries is None else args.retries,
            max_concurrency=8 if args.concurrency is None else args.concurrency, store=_Counting(store, advance))
    except (TypeError, ValueError) as exc:  # the message names the parameter and what it allows
        message = str(exc)
        for parameter, flag in _FLAG_OF.items():
            if message.startswith(parameter + " "):
                message = flag + message[len(parameter):]
        raise CommandError(f"grade: {message}", code=2) from None
    check_store(store, label_of(args.store))
    return evaluator, label_of(args.store)


def _load(spec: str) -> AgentAsJudgeEval:
    obj = import_object(spec, "grade: --import-evaluator")
    if callable(obj) and not isinstance(obj, AgentAsJudgeEval):
        obj = obj()
    if not isinstance(obj, AgentAsJudgeEval):
        raise CommandError(f"grade: --import-evaluator {spec!r} is a {type(obj).__name__}, not a "
                           "judgehooks.AgentAsJudgeEval", code=2)
    return obj


class _Counting(BaseStore):
    """The store, advancing the progress bar as records are written."""

    def __init__(self, store: Store, advance: Callable[[int], None]) -> None:
        self.store, self.advance = store, advance

    def __repr__(self) -> str:
        return repr(self.store)

    async def write(self, records: Sequence[EvalRecord]) -> None:
        await self.store.write(records)
        self.advance(len(records))

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        return await self.store.query(**where.keywords(), limit=limit)

    async def aclose(self) -> None:
        await self.store.aclose()


def _grade(evaluator: AgentAsJudgeEval, path: str, total: int, chunk_size: int,
           advance: Callable[[int], None], max_line_bytes: int) -> dict[str, Any]:
    """Grade chunk by chunk through the evaluator's own offline pipeline. Stops at the first chunk the
    store could not take (it is down: more judge calls would be paid for nothing)."""
    batch = uuid.uuid4().hex
    per_record = isinstance(evaluator.store, _Counting)  # else the bar moves a chunk at a time
    statuses: Counter[str] = Counter()
    unstored: list[EvalRecord] = []
    done = 0
    first_not_graded: int | None = None
    first_error: str | None = None

    def grade(chunk: list[dict[str, Any]]) -> bool:
        nonlocal done
        records, failed = _grade_chunk(evaluator, chunk)
        statuses.update(r.status for r in records)
        nonlocal first_error
        first_error = first_error or next((f"{r.error_type}: {r.error_message}" for r in records
                                           if r.status == "error"), None)
        unstored.extend(failed)
        done += len(chunk)
        if not per_record:
            advance(len(chunk))
        return bool(failed)

    lines = _cases(path, batch, max_line_bytes)
    chunk: list[dict[str, Any]] = []
    for _, case in lines:
        chunk.append(case)
        if len(chunk) == chunk_size:
            stop, chunk = grade(chunk), []
            if stop:
                first_not_graded = next((number for number, _ in lines), None)
                break
    if chunk:
        grade(chunk)
    graded = statuses["passed"] + statuses["failed"]
    return {"batch_id": batch, "cases": total, "passed": statuses["passed"], "failed": statuses["failed"],
            "error": statuses["error"], "skipped": statuses["skipped"],
            "pass_rate": statuses["passed"] / graded if graded else None,
            "first_error": first_error, "stored": done - len(unstored), "not_stored": len(unstored),
            "not_graded": total - done,
            "first_line_not_graded": first_not_graded, "unstored_file": _keep(path, batch, unstored)}


def _cases(path: str, batch: str, max_line_bytes: int) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, case in read_cases(path, max_line_bytes):
        if isinstance(case, CaseError):
            raise CommandError(f"grade: {case} (the file changed while grading; what was graded before is "
                               f"stored with metadata case.batch_id {batch})", code=2)
        metadata = {**(case.get("metadata") or {}),
                    "case": {"file": os.path.basename(path), "line": number, "batch_id": batch, "id": case.get("id")}}
        yield number, {"input": case["input"], "output": case["output"],
                       "expected_output": case.get("expected_output", case.get("expected")), "metadata": metadata}


def _grade_chunk(evaluator: AgentAsJudgeEval, chunk: list[dict[str, Any]]) -> tuple[list[EvalRecord], list[EvalRecord]]:
    """(every record of the chunk, the ones the store could not take)."""
    try:
        return evaluator.run(cases=chunk).records, []
    except StoreError as exc:
        return exc.result.records, list(exc.records)


def _keep(path: str, batch: str, records: list[EvalRecord]) -> str | None:
    """Records the store refused, written beside the cases file so no verdict is lost."""
    if not records:
        return None
    target = Path(path).with_name(f"{Path(path).stem}.unstored-{batch[:8]}.jsonl")
    with open(target, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record.model_dump(mode="json"), ensure_ascii=False) + "\n")
    return str(target)


@contextmanager
def _progress(wanted: bool | None, total: int, label: str = "grading") -> Iterator[Callable[[int], None]]:
    """A function advancing a progress bar on stderr by n records (a no-op without a bar)."""
    if not (sys.stderr.isatty() if wanted is None else wanted):
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("grade", total=total)
        yield lambda n: bar.advance(task, n)


def _render(s: dict[str, Any]) -> str:
    graded = s["passed"] + s["failed"]
    rate = "-" if s["pass_rate"] is None else f"{100 * s['pass_rate']:.1f}%"
    lines = [f"judgehooks grade: {s['cases_file']} -> {s['store']} (evaluator {s['evaluator']}, batch {s['batch_id']})",
             f"  {s['cases']} case(s): {s['passed']} passed, {s['failed']} failed, {s['error']} error, "
             f"{s['skipped']} skipped",
             f"  pass rate {rate} of {graded} graded" + (f"; {s['error']} judge error(s) are not counted as failures"
                                                       if s["error"] else ""),
             f"  stored {s['stored']} of {s['cases']}"]
    if s["first_error"]:
        every = s["error"] == s["cases"]
        lines.append(f"  {'EVERY CASE ENDED IN ERROR; the first' if every else 'first error'}: "
                     f"{clip(s['first_error'], 200)}")
    if s["not_stored"]:
        lines.append(f"  NOT STORED: {s['not_stored']} record(s), kept in {s['unstored_file']}")
    if s["not_graded"]:
        lines.append(f"  NOT GRADED: {s['not_graded']} case(s) from line {s['first_line_not_graded']} on "
                     "(stopped: the store is failing)")
    return "\n".join(lines)
