"""Re-judge a sample of records K times: how often the verdict flips, how much the score moves."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import time
import uuid
from typing import Any

from .._base.context import EvalContext
from .._base.outcome import run_evaluator
from .._base.record import EvalRecord, record_id
from .._evaluators.llm import DEFAULT_MODEL, AgentAsJudgeEval
from .._grading.pipeline import make_record
from ..stores._base import iter_records, write_with_retry
from .common import CommandError, add_store_argument, call, count, label_of, one_line, open_store, read
from .terminal import printable_strings, say

UNVERSIONED = "unversioned"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--evaluator", required=True, metavar="NAME",
                        help="the LLM evaluator whose records to re-judge")
    parser.add_argument("--version", metavar="V", help="its version (default: the newest record's)")
    parser.add_argument("--sample", type=count, default=20, metavar="N", help="records to re-judge (default 20)")
    parser.add_argument("--repeats", type=count, default=3, metavar="K", help="re-judgments per record (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's random seed (default 0)")
    parser.add_argument("--model", help="the judge's litellm model string (default: $JUDGEHOOKS_MODEL or "
                                        f"{DEFAULT_MODEL}); criteria, mode, threshold and guidelines come from the "
                                        "records")
    parser.add_argument("--api-base", help="judge endpoint, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key", help="judge API key (default: the provider's environment variable)")
    parser.add_argument("--temperature", type=float, help="the judge's sampling temperature, as it graded the records")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per judge call (default 60)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    if args.sample < 1 or args.repeats < 1:
        raise CommandError("consistency: --sample and --repeats must be at least 1", code=2)
    store = open_store(args.store, must_exist=True)
    records = read(label_of(args.store), _graded, store, args.evaluator)
    if not records:
        raise CommandError(f"consistency: no graded records of evaluator {args.evaluator!r}")
    version = args.version or records[0].evaluator_version or UNVERSIONED
    records = [r for r in records if (r.evaluator_version or UNVERSIONED) == version]
    if not records:
        raise CommandError(f"consistency: evaluator {args.evaluator!r} has no graded records of version {version!r}")
    if not records[0].criteria:
        raise CommandError(f"consistency: the records of {args.evaluator!r} name no criteria: only LLM judges "
                           "(AgentAsJudgeEval) are re-judged from their records")
    sample = random.Random(args.seed).sample(sorted(records, key=lambda r: r.id), min(args.sample, len(records)))
    evaluator = _rebuild(sample[0], args, store)
    try:
        outcome = call(_rejudge, evaluator, sample, args.repeats, store)
    except Exception as exc:
        raise CommandError(f"consistency: cannot store the re-judged records in {label_of(args.store)}: "
                           f"{one_line(exc)}") from None
    result = summary(sample, outcome, args.evaluator, version, evaluator.evaluator_version, args.repeats)
    say(json.dumps(result, indent=2) if args.json else render(printable_strings(result)))
    return 0


async def _graded(store: Any, evaluator: str) -> list[EvalRecord]:
    return [r async for r in iter_records(store, evaluator=evaluator)
            if r.status in ("passed", "failed") and r.rejudge_of is None]


def _rebuild(record: EvalRecord, args: argparse.Namespace, store: Any) -> AgentAsJudgeEval:
    """The judge again, from what the record says it was asked: criteria, mode, threshold, guidelines."""
    return AgentAsJudgeEval(
        criteria=record.criteria or "", scoring_strategy=record.mode,
        threshold=record.threshold if record.mode == "numeric" and record.threshold is not None else 7,
        additional_guidelines=record.metadata.get("additional_guidelines"), name=record.evaluator,
        model=args.model or os.environ.get("JUDGEHOOKS_MODEL") or DEFAULT_MODEL, api_base=args.api_base,
        api_key=args.api_key, temperature=args.temperature, timeout=args.timeout, store=store)


async def _rejudge(evaluator: AgentAsJudgeEval, sample: list[EvalRecord], repeats: int,
                   store: Any) -> dict[str, list[EvalRecord]]:
    """Each record judged `repeats` more times, stored marked with ``rejudge_of`` (one batch)."""
    token = uuid.uuid4().hex  # this command's run: ids never collide with an earlier run's
    found: dict[str, list[EvalRecord]] = {}
    for original in sample:
        ctx = EvalContext(input=original.input, output=original.output, run_id=original.run_id,
                          agent_id=original.agent_id, agent_name=original.agent_name, team_id=original.team_id,
                          team_name=original.team_name, metadata=dict(original.metadata))
        for k in range(repeats):
            started = time.perf_counter()
            outcome = await run_evaluator(evaluator, ctx)
            record = make_record(ctx, evaluator, outcome, latency_ms=(time.perf_counter() - started) * 1000)
            found.setdefault(original.id, []).append(dataclasses.replace(
                record, id=record_id(original.evaluator, f"rejudge:{token}:{original.id}", k),
                rejudge_of=original.id))
    await write_with_retry(store, [r for records in found.values() for r in records])
    return found


def summary(sample: list[EvalRecord], rejudged: dict[str, list[EvalRecord]], evaluator: str, version: str,
            rebuilt: str, repeats: int) -> dict[str, Any]:
    """Flip rate (binary verdicts) and score spread (numeric) over the original and its re-judgments."""
    flipped = compared = agreeing = judged = errors = 0
    spreads: list[float] = []
    for original in sample:
        again = rejudged.get(original.id, [])
        errors += sum(r.status == "error" for r in again)
        verdicts = [original.passed] + [r.passed for r in again if r.status in ("passed", "failed")]
        judged += len(verdicts) - 1
        agreeing += sum(v == original.passed for v in verdicts[1:])
        if len(verdicts) > 1:
            compared += 1
            flipped += len(set(verdicts)) > 1
        scores = [float(r.score) for r in [original, *again] if r.score is not None and r.status != "error"]
        if original.mode == "numeric" and len(scores) > 1:
            spreads.append(statistics.pstdev(scores))
    notes = []
    if rebuilt != version:
        notes.append(f"the judge rebuilt here has version {rebuilt}, the records {version}: a different model, "
                     "prompt or setting; --model and --api-base must name the judge that graded them")
    return {"evaluator": evaluator, "version": version, "rebuilt_version": rebuilt, "records": len(sample),
            "repeats": repeats, "rejudged": judged + errors, "errors": errors,
            "flipped": flipped, "flip_rate": flipped / compared if compared else None,
            "agreement": agreeing / judged if judged else None,
            "score_std_mean": statistics.fmean(spreads) if spreads else None,
            "score_std_max": max(spreads) if spreads else None, "notes": notes}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def render(data: dict[str, Any]) -> str:
    lines = [f"judgehooks consistency: {data['evaluator']}@{data['version']}: {data['records']} record(s) x "
             f"{data['repeats']} re-judgment(s) ({data['errors']} error(s))",
             f"flip rate: {_pct(data['flip_rate'])} ({data['flipped']} of {data['records']} record(s) got "
             "different verdicts)",
             f"agreement with the stored verdict: {_pct(data['agreement'])} of re-judgments"]
    if data["score_std_mean"] is not None:
        lines.append(f"score standard deviation per record: mean {data['score_std_mean']:.2f}, "
                     f"max {data['score_std_max']:.2f}")
    lines.append("re-judged records are stored with rejudge_of set: report, calibrate, review and export skip them")
    lines += [f"note: {note}" for note in data["notes"]]
    return "\n".join(lines)
