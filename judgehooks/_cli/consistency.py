"""Re-judge a sample of records K times: how often the verdict flips, how much the score moves.

The judge is rebuilt from what the records say it was asked (an `AgentAsJudgeEval`'s criteria,
mode, threshold and guidelines, with --model and --api-base), or taken from --import MODULE: the
evaluator of that name the module defines, with the settings it was built with (any kind).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from .._alerts.consistency import UNVERSIONED, aconsistency, graded_records
from .._base.record import EvalRecord
from .._evaluators.llm import DEFAULT_MODEL, AgentAsJudgeEval
from .common import call, import_module, label_of, module_evaluators, one_line, open_store, read
from .options import CommandError
from .terminal import printable_strings, say


def run(args: argparse.Namespace) -> int:
    if args.sample < 1 or args.repeats < 1:
        raise CommandError("consistency: --sample and --repeats must be at least 1", code=2)
    store = open_store(args.store, must_exist=True)
    if args.import_:
        evaluator: Any = _imported(args.import_, args.evaluator)
    else:
        records = read(label_of(args.store), graded_records, store, args.evaluator)
        evaluator = _rebuild(_of_version(records, args), args, store)
    try:
        result = call(aconsistency, evaluator, name=args.evaluator, version=args.evaluator_version, sample=args.sample,
                      repeats=args.repeats, seed=args.seed, store=store)
    except LookupError as exc:
        raise CommandError(f"consistency: {one_line(exc)}") from None
    except Exception as exc:
        raise CommandError(f"consistency: cannot store the re-judged records in {label_of(args.store)}: "
                           f"{one_line(exc)}") from None
    data = result.to_json()
    if not args.import_ and result.rebuilt_version != result.version:
        data["notes"] = [f"the judge rebuilt here has version {result.rebuilt_version}, the records "
                         f"{result.version}: a different model, prompt or setting; --model and --api-base must "
                         "name the judge that graded them"]
    say(json.dumps(data, indent=2) if args.json else render(printable_strings(data)))
    return 0


def _of_version(records: list[EvalRecord], args: argparse.Namespace) -> EvalRecord:
    """A record of the version to re-judge, checked to be an AgentAsJudgeEval's (the one kind whose
    records say everything its judge was asked)."""
    if not records:
        raise CommandError(f"consistency: no graded records of evaluator {args.evaluator!r}")
    version = args.evaluator_version or records[0].evaluator_version or UNVERSIONED
    record = next((r for r in records if (r.evaluator_version or UNVERSIONED) == version), None)
    if record is None:
        raise CommandError(f"consistency: evaluator {args.evaluator!r} has no graded records of version {version!r}")
    why = rebuild_problem(record)
    if why is not None:
        raise CommandError(f"consistency: the records of {args.evaluator!r} cannot rebuild its judge: {why}; pass "
                           "--import MODULE (a module that defines the evaluator at module level), or call "
                           "judgehooks.consistency(evaluator, ...) from Python with the evaluator itself")
    return record


def rebuild_problem(record: EvalRecord) -> str | None:
    """Why an evaluator cannot be rebuilt from `record`, or None when it is an AgentAsJudgeEval's."""
    if isinstance(record.details.get("criteria"), list):
        return ("they are a Rubric's, which keep its criteria's names and weights but not their descriptions "
                "(the judge's prompt)")
    if not record.criteria:
        return ("they name no criteria: they come from a check, a ScorerEval, a function or a composite, whose "
                "code or objects a record does not hold")
    if not record.judge_model:
        return "they name no judge model"
    return None


def _imported(module_name: str, evaluator: str) -> Any:
    """The evaluator named `evaluator` that `module_name` defines at module level."""
    module = import_module(module_name, "consistency: --import")
    found = {v.evaluator_name: v for v in module_evaluators(module)}
    if evaluator not in found:
        names = ", ".join(sorted(found)) or "none"
        raise CommandError(f"consistency: --import {module_name} defines no evaluator named {evaluator!r} "
                           f"(it defines: {names})", code=2)
    return found[evaluator]


def _rebuild(record: EvalRecord, args: argparse.Namespace, store: Any) -> AgentAsJudgeEval:
    """The judge again, from what the record says it was asked: criteria, mode, threshold, guidelines."""
    return AgentAsJudgeEval(
        criteria=record.criteria or "", scoring_strategy=record.mode,
        threshold=record.threshold if record.mode == "numeric" and record.threshold is not None else 7,
        additional_guidelines=record.metadata.get("additional_guidelines"), name=record.evaluator,
        model=args.model or os.environ.get("JUDGEHOOKS_MODEL") or DEFAULT_MODEL, api_base=args.api_base,
        api_key=args.api_key, temperature=args.temperature, timeout=args.timeout, store=store)


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
