"""`consistency()`: does a judge agree with itself? Re-judge a sample of stored records K times with
the evaluator given (any kind: an LLM judge, a Rubric, a ScorerEval, a function) and measure how
often the verdict flips and how much the score moves.

The re-judged records are stored marked ``rejudge_of`` (the record they re-judge): `report`,
`calibrate`, `review` and `export` skip them, so a pass rate never changes.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._base.context import EvalContext
from .._base.outcome import run_evaluator
from .._base.record import EvalRecord, record_id
from .._grading.pipeline import make_record
from .._runtime import runtime
from ..stores._base import Store, iter_records, write_with_retry
from ..stores._url import default_store

UNVERSIONED = "unversioned"


@dataclass(frozen=True)
class Consistency:
    """An evaluator against itself. Rates are 0..1; None when nothing was compared."""

    evaluator: str
    version: str
    rebuilt_version: str
    records: int
    repeats: int
    rejudged: int
    errors: int
    flipped: int
    flip_rate: float | None
    agreement: float | None
    score_std_mean: float | None
    score_std_max: float | None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


async def graded_records(store: Store, evaluator: str) -> list[EvalRecord]:
    """The graded records of `evaluator` that are not re-judgments, newest first."""
    return [r async for r in iter_records(store, evaluator=evaluator)
            if r.status in ("passed", "failed") and r.rejudge_of is None]


def pick(records: list[EvalRecord], evaluator: str, version: str | None, sample: int,
         seed: int) -> tuple[str, list[EvalRecord]]:
    """The version (default: the newest record's) and a seeded sample of its records; LookupError
    naming what is missing."""
    if not records:
        raise LookupError(f"no graded records of evaluator {evaluator!r}")
    version = version or records[0].evaluator_version or UNVERSIONED
    mine = sorted((r for r in records if (r.evaluator_version or UNVERSIONED) == version), key=lambda r: r.id)
    if not mine:
        raise LookupError(f"evaluator {evaluator!r} has no graded records of version {version!r}")
    return version, random.Random(seed).sample(mine, min(sample, len(mine)))


async def rejudge(evaluator: Any, sample: Sequence[EvalRecord], repeats: int,
                  store: Store) -> dict[str, list[EvalRecord]]:
    """Each record judged `repeats` more times by `evaluator`, stored marked with ``rejudge_of`` (one batch)."""
    token = uuid.uuid4().hex  # this run's re-judgments: ids never collide with an earlier run's
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
                evaluator=original.evaluator, rejudge_of=original.id))
    await write_with_retry(store, [r for records in found.values() for r in records])
    return found


def summary(sample: Sequence[EvalRecord], rejudged: dict[str, list[EvalRecord]], evaluator: str, version: str,
            rebuilt: str, repeats: int) -> Consistency:
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
        notes.append(f"the judge used here has version {rebuilt}, the records {version}: a different model, "
                     "prompt or setting, so this measures that judge, not the one that graded them")
    return Consistency(
        evaluator=evaluator, version=version, rebuilt_version=rebuilt, records=len(sample), repeats=repeats,
        rejudged=judged + errors, errors=errors, flipped=flipped, flip_rate=flipped / compared if compared else None,
        agreement=agreeing / judged if judged else None,
        score_std_mean=statistics.fmean(spreads) if spreads else None,
        score_std_max=max(spreads) if spreads else None, notes=notes)


async def aconsistency(evaluator: Any, *, name: str | None = None, version: str | None = None, sample: int = 20,
                       repeats: int = 3, seed: int = 0, store: Store | None = None) -> Consistency:
    """Re-judge a seeded sample of `sample` graded records of `name` (default: the evaluator's own
    name) `repeats` times each with `evaluator`, the judge with your settings, and say how often the
    verdict flips. `version`: which records (default: the newest record's). Raises LookupError
    when there are no such records, ValueError for a sample or repeats under 1."""
    if sample < 1 or repeats < 1:
        raise ValueError(f"sample and repeats must be at least 1, got sample={sample}, repeats={repeats}")
    store = store if store is not None else default_store()
    name = name or evaluator.evaluator_name
    version, chosen = pick(await graded_records(store, name), name, version, sample, seed)
    found = await rejudge(evaluator, chosen, repeats, store)
    return summary(chosen, found, name, version, evaluator.evaluator_version or UNVERSIONED, repeats)


def consistency(evaluator: Any, *, name: str | None = None, version: str | None = None, sample: int = 20,
                repeats: int = 3, seed: int = 0, store: Store | None = None) -> Consistency:
    """`aconsistency` for sync callers (run on the judgehooks loop)."""
    return runtime.call(functools.partial(aconsistency, evaluator, name=name, version=version, sample=sample,
                                          repeats=repeats, seed=seed, store=store))
