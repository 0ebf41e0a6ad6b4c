"""Write stored records (failures by default) as test cases: JSONL to grade again, or a pydantic-evals dataset."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

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


def case_line(record: EvalRecord) -> dict[str, Any]:
    """One record as a `judgehooks grade` case: the same input and output, graded again."""
    line: dict[str, Any] = {"id": record.id, "input": record.input, "output": record.output,
                            "metadata": case_metadata(record)}
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
    where = filters_of(args).replace(status=args.status, since=args.since)
    records = read(label_of(args.store), _records, store, where.keywords(), args.limit)
    if args.format == "jsonl":
        text = "".join(json.dumps(case_line(r), ensure_ascii=False) + "\n" for r in records)
    else:
        text = json.dumps(dataset(records, f"judgehooks {args.status} records"), ensure_ascii=False, indent=2) + "\n"
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
    say(f"wrote {len(records)} {args.status} record(s) as {args.format} cases to {args.output}", one_line=True)
    return 0


async def _records(store: Any, filters: dict[str, Any], limit: int | None) -> list[EvalRecord]:
    found = []
    async for record in iter_records(store, **filters):
        if record.rejudge_of is None:
            found.append(record)
            if limit is not None and len(found) >= limit:
                break
    return found
