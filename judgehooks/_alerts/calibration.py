"""`calibrate()`: how far a judge agrees with the people who labelled its records.

Pairs each labelled record of one evaluator version with its human verdict (the reviewers'
majority; a tie is left out and counted), then computes the statistics of `agreement` and the
pass rate over every graded record of that version, raw and corrected for the judge's error.

What it reads does not grow with the store: the labels, the labelled records by id, and one
count of the graded records per version (in SQL on SQLite and PostgreSQL), never every record.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from .._base.agreement import Confusion, kappa_interval, mean_absolute_error, rogan_gladen, spearman
from .._base.label import Label
from .._base.record import EvalRecord
from .._runtime import runtime
from ..stores._base import BaseStore, RecordFilter, Store
from ..stores._browse import Browse, page, verdict_counts
from ..stores._url import default_store

#: below this many labelled records the numbers say little: the result says so
MIN_LABELS = 30
UNVERSIONED = "unversioned"


@dataclass(frozen=True)
class Calibration:
    """The judge against people, for one evaluator version. Rates are 0..1; None when undefined."""

    evaluator: str
    version: str
    versions: list[str]
    n: int
    ties: int
    confusion: Confusion
    accuracy: float | None
    true_pass_rate: float | None
    true_fail_rate: float | None
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    scored: int
    spearman: float | None
    mae: float | None
    graded: int
    raw_pass_rate: float | None
    corrected_pass_rate: float | None
    seed: int
    notes: list[str] = field(default_factory=list)

    @property
    def too_small(self) -> bool:
        return self.n < MIN_LABELS

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["confusion"] = asdict(self.confusion)
        data["kappa_ci"] = list(self.kappa_ci) if self.kappa_ci else None
        data["too_small"] = self.too_small
        return data


def human_verdict(record: EvalRecord, labels: list[Label]) -> tuple[bool | None, float | None]:
    """The reviewers' verdict on `record`: the majority pass/fail (None on a tie), a label with only
    a score counting as passing when it reaches the record's threshold; and their mean score."""
    votes = []
    for label in labels:
        if label.passed is not None:
            votes.append(label.passed)
        elif label.score is not None and record.threshold is not None:
            votes.append(label.score >= record.threshold)
    scores = [label.score for label in labels if label.score is not None]
    yes, no = votes.count(True), votes.count(False)
    return (None if yes == no else yes > no), (statistics.fmean(scores) if scores else None)


async def acalibrate(evaluator: str, *, version: str | None = None, store: Store | None = None, seed: int = 0,
                     resamples: int = 2000) -> Calibration:
    """Compare the judge `evaluator` with the human labels in `store` (default: the default SQLite
    store). `version`: which evaluator version (default: the newest graded record's). Raises
    LookupError when the store holds no graded record of it."""
    store = _labelled_store(store)
    counts = _graded_counts(await verdict_counts(store, Browse(RecordFilter(evaluator=evaluator))))
    if evaluator not in counts:
        raise LookupError(f"no graded records of evaluator {evaluator!r} in {store!r}")
    versions = sorted(counts[evaluator])
    newest = await page(store, Browse(RecordFilter(evaluator=evaluator), judged=True), limit=1)
    chosen = version or (newest[0].evaluator_version if newest else None) or UNVERSIONED
    if chosen not in versions:
        raise LookupError(f"evaluator {evaluator!r} has no graded records of version {chosen!r} "
                          f"(it has {', '.join(versions)})")
    [found] = await _calibrations(store, {evaluator: {chosen: counts[evaluator][chosen]}}, {evaluator: versions},
                                  seed=seed, resamples=resamples)
    return found


async def acalibrate_all(store: Store, *, evaluator: str | None = None, seed: int = 0,
                         resamples: int = 2000) -> list[Calibration]:
    """`acalibrate` for every version of every evaluator (or of `evaluator`) with graded records,
    ordered by evaluator and version: one count, one read of the labels and of the records they label."""
    store = _labelled_store(store)
    counts = _graded_counts(await verdict_counts(store, Browse(RecordFilter(evaluator=evaluator))))
    versions = {name: sorted(of) for name, of in counts.items()}
    return await _calibrations(store, counts, versions, seed=seed, resamples=resamples)


def _labelled_store(store: Store | None) -> BaseStore:
    store = store if store is not None else default_store()
    if not isinstance(store, BaseStore):
        raise TypeError(f"calibrate reads labels from a judgehooks store (BaseStore), got {type(store).__name__}")
    return store


def _graded_counts(found: dict[tuple[str, str | None], tuple[int, int]]) -> dict[str, dict[str, tuple[int, int]]]:
    """(graded, passed) per evaluator and version (unversioned records under `UNVERSIONED`)."""
    counts: dict[str, dict[str, tuple[int, int]]] = {}
    for (evaluator, version), (n, passed) in found.items():
        graded, passing = counts.setdefault(evaluator, {}).get(version or UNVERSIONED, (0, 0))
        counts[evaluator][version or UNVERSIONED] = (graded + n, passing + passed)
    return counts


async def _calibrations(store: BaseStore, counts: dict[str, dict[str, tuple[int, int]]],
                        versions: dict[str, list[str]], *, seed: int, resamples: int) -> list[Calibration]:
    """One `Calibration` per evaluator version in `counts`, from the labels and the records they label."""
    by_record: dict[str, list[Label]] = {}
    for label in await store.read_labels():
        by_record.setdefault(label.record_id, []).append(label)
    labelled: dict[tuple[str, str], list[EvalRecord]] = {}
    for record in await store.records_by_id(by_record) if by_record else []:
        version = record.evaluator_version or UNVERSIONED
        if (record.status in ("passed", "failed") and record.rejudge_of is None
                and version in counts.get(record.evaluator, {})):
            labelled.setdefault((record.evaluator, version), []).append(record)
    found = []
    for evaluator in sorted(counts):
        for version in sorted(counts[evaluator]):
            graded, passed = counts[evaluator][version]
            records = sorted(labelled.get((evaluator, version), []), key=lambda r: (r.created_at, r.id), reverse=True)
            found.append(_calibration(evaluator, version, versions[evaluator], records, by_record, graded=graded,
                                      passed=passed, seed=seed, resamples=resamples))
    return found


def calibrate(evaluator: str, *, version: str | None = None, store: Store | None = None, seed: int = 0,
              resamples: int = 2000) -> Calibration:
    """`acalibrate` for sync callers (run on the judgehooks loop)."""
    return runtime.call(functools.partial(acalibrate, evaluator, version=version, store=store, seed=seed,
                                          resamples=resamples))


def _calibration(evaluator: str, version: str, versions: list[str], labelled: list[EvalRecord],
                 by_record: dict[str, list[Label]], *, graded: int, passed: int, seed: int,
                 resamples: int) -> Calibration:
    pairs: list[tuple[bool, bool]] = []
    judge_scores: list[float] = []
    human_scores: list[float] = []
    ties = 0
    for record in labelled:  # the labelled graded records of this version, newest first
        labels = by_record.get(record.id)
        if not labels:
            continue
        people, score = human_verdict(record, labels)
        if people is None:
            ties += 1
            continue
        pairs.append((bool(record.passed), people))
        if score is not None and record.score is not None:
            judge_scores.append(float(record.score))
            human_scores.append(score)
    confusion = Confusion.of(pairs)
    raw = passed / graded
    notes = []
    if len(pairs) < MIN_LABELS:
        notes.append(f"n={len(pairs)} labelled records is too small to conclude anything: label at least "
                     f"{MIN_LABELS} (the kappa interval shows how little is known)")
    if confusion.tp + confusion.fn == 0 or confusion.tn + confusion.fp == 0:
        notes.append("people passed all or failed all of the labelled records: label both kinds to measure "
                     "the true-pass and true-fail rates")
    if len(versions) > 1:
        notes.append(f"version {version} of {len(versions)} ({', '.join(versions)}): labels of other versions "
                     "say nothing about this one (--evaluator-version chooses)")
    return Calibration(
        evaluator=evaluator, version=version, versions=versions, n=len(pairs), ties=ties, confusion=confusion,
        accuracy=confusion.accuracy, true_pass_rate=confusion.true_pass_rate, true_fail_rate=confusion.true_fail_rate,
        kappa=confusion.kappa, kappa_ci=kappa_interval(pairs, resamples=resamples, seed=seed),
        scored=len(judge_scores), spearman=spearman(judge_scores, human_scores),
        mae=mean_absolute_error(judge_scores, human_scores), graded=graded, raw_pass_rate=raw,
        corrected_pass_rate=rogan_gladen(raw, confusion.true_pass_rate, confusion.true_fail_rate), seed=seed,
        notes=notes)
