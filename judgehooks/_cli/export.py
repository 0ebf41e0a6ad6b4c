"""Write stored records (failures by default) as test cases: JSONL to grade again, or a pydantic-evals dataset."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection
from typing import Any

from .._alerts.calibration import human_verdict
from .._base.label import Label
from .._base.record import EvalRecord
from .._base.sqlitefile import create_file
from ..stores._base import iter_records
from .common import filters_of, label_of, one_line, open_store, read
from .options import CommandError
from .terminal import printable, say


def case_metadata(record: EvalRecord) -> dict[str, Any]:
    """Where a case came from and what the judge said of it."""
    return {"record_id": record.id, "evaluator": record.evaluator, "evaluator_version": record.evaluator_version,
            "status": record.status, "score": record.score, "threshold": record.threshold, "reason": record.reason,
            "run_id": record.run_id, "agent_id": record.agent_id, "team_id": record.team_id,
            "created_at": record.created_at.isoformat()}


def expected_of(record: EvalRecord) -> str | None:
    """The expected output when the run's metadata gave one (offline cases and `metadata["expected"]`)."""
    for key in ("expected_output", "expected"):
        value = record.metadata.get(key)
        if isinstance(value, str):
            return value
    return None


def case_line(record: EvalRecord, passed: bool | None = None) -> dict[str, Any]:
    """One record as a `judgehooks grade` case: the same input and output, graded again; with the
    reviewers' verdict `passed` (``--labelled``), a golden case for a judge's health check."""
    line: dict[str, Any] = {"id": record.id, "input": record.input, "output": record.output,
                            "metadata": case_metadata(record)}
    if passed is not None:
        line["passed"] = passed
    expected = expected_of(record)
    if expected is not None:
        line["expected_output"] = expected
    return line


def dataset(records: list[EvalRecord], name: str) -> dict[str, Any]:
    """The records as a pydantic-evals dataset: each input a case for the agent to answer again,
    the output it gave then and the judge's reason in the case's metadata."""
    cases: list[dict[str, Any]] = [{"name": record.id, "inputs": record.input, "expected_output": expected_of(record),
              "metadata": {**case_metadata(record), "output": record.output}, "evaluators": []}
             for record in records]
    return {"name": name, "cases": cases, "evaluators": [], "report_evaluators": []}


def run(args: argparse.Namespace) -> int:
    store = open_store(args.store, must_exist=True)
    status = args.status or (None if args.labelled else "failed")
    where = filters_of(args).replace(status=status, since=args.since)
    verdicts: dict[str, bool] = {}
    if args.labelled:  # a golden set: the records people labelled, each with their majority verdict
        verdicts = read(label_of(args.store), _verdicts, store)
    records = read(label_of(args.store), _records, store, where.keywords(), args.limit,
                   verdicts.keys() if args.labelled else None)
    what = " ".join(word for word in ("labelled" if args.labelled else None, status) if word)
    if args.format == "jsonl":
        text = "".join(json.dumps(case_line(r, verdicts.get(r.id)), ensure_ascii=False) + "\n" for r in records)
    else:
        text = json.dumps(dataset(records, f"judgehooks {what} records"), ensure_ascii=False, indent=2) + "\n"
    if args.output is None:
        # stdout may be a terminal: every character that could steer one (JSON leaves C1 controls, DEL
        # and bidi overrides raw) becomes its JSON escape, which decodes to the same text.
        sys.stdout.write(printable(text))
        sys.stdout.flush()
        return 0
    try:
        create_file(args.output)  # 0600 when new (users' inputs and answers); an existing file keeps its mode
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise CommandError(f"export: cannot write {args.output!r}: {one_line(exc)}") from None
    say(f"wrote {len(records)} {what} record(s) as {args.format} cases to {args.output}", one_line=True)
    return 0


async def _verdicts(store: Any) -> dict[str, bool]:
    """The reviewers' majority verdict per labelled record (ties left out), as `calibrate` counts them."""
    by_record: dict[str, list[Label]] = {}
    for label in await store.read_labels():
        by_record.setdefault(label.record_id, []).append(label)
    found = {}
    for record in await store.records_by_id(list(by_record)):
        passed, _ = human_verdict(record, by_record[record.id])
        if passed is not None:
            found[record.id] = passed
    return found


async def _records(store: Any, filters: dict[str, Any], limit: int | None,
                   only: Collection[str] | None = None) -> list[EvalRecord]:
    """The records to export, newest first: never a `consistency` re-judgement or a judge health
    check; with `only`, just those ids."""
    found = []
    async for record in iter_records(store, **filters):
        if record.rejudge_of is None and record.scope != "health" and (only is None or record.id in only):
            found.append(record)
            if limit is not None and len(found) >= limit:
                break
    return found
