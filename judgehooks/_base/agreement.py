"""Agreement statistics between a judge and people, pure functions over plain numbers: the
confusion matrix, Cohen's kappa with a seeded bootstrap interval, Spearman's rho, the mean
absolute error, and the Rogan-Gladen pass rate corrected for the judge's measured error."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Confusion:
    """Judge verdicts against human ones: ``tp`` both pass, ``tn`` both fail, ``fp`` the judge
    passes what people fail, ``fn`` the judge fails what people pass."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @classmethod
    def of(cls, pairs: Sequence[tuple[bool, bool]]) -> Confusion:
        """From (judge passed, human passed) pairs."""
        tp = sum(1 for j, h in pairs if j and h)
        fp = sum(1 for j, h in pairs if j and not h)
        fn = sum(1 for j, h in pairs if not j and h)
        return cls(tp, fp, fn, len(pairs) - tp - fp - fn)

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def accuracy(self) -> float | None:
        return _ratio(self.tp + self.tn, self.n)

    @property
    def true_pass_rate(self) -> float | None:
        """Of what people pass, the share the judge passes (sensitivity)."""
        return _ratio(self.tp, self.tp + self.fn)

    @property
    def true_fail_rate(self) -> float | None:
        """Of what people fail, the share the judge fails (specificity)."""
        return _ratio(self.tn, self.tn + self.fp)

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa: agreement beyond what the two pass rates give by chance; None when chance
        alone explains every verdict (both always say the same one thing)."""
        n = self.n
        if not n:
            return None
        observed = (self.tp + self.tn) / n
        chance = ((self.tp + self.fp) * (self.tp + self.fn) + (self.fn + self.tn) * (self.fp + self.tn)) / (n * n)
        return None if chance == 1 else (observed - chance) / (1 - chance)


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def kappa_interval(pairs: Sequence[tuple[bool, bool]], *, resamples: int = 2000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float] | None:
    """A percentile bootstrap interval for kappa: `resamples` resamplings of the pairs with
    replacement, from a seeded generator (the same pairs and seed give the same interval)."""
    if len(pairs) < 2:
        return None
    rng = random.Random(seed)
    # A pair is one of four kinds (tp, fp, fn, tn): a resampling is drawn as kinds and counted, which
    # is the same distribution as resampling the pairs themselves, at a fraction of the cost.
    kinds = [(0 if h else 1) if j else (2 if h else 3) for j, h in pairs]
    values = []
    for _ in range(resamples):
        drawn = rng.choices(kinds, k=len(kinds))
        tp, fp, fn = drawn.count(0), drawn.count(1), drawn.count(2)
        kappa = Confusion(tp, fp, fn, len(drawn) - tp - fp - fn).kappa
        if kappa is not None:
            values.append(kappa)
    if not values:
        return None
    values.sort()
    tail = (1 - level) / 2
    return _percentile(values, tail), _percentile(values, 1 - tail)


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given the mean of the ranks they span."""
    result = [0.0] * len(values)
    start = 0
    for _, tied in itertools.groupby(sorted(range(len(values)), key=values.__getitem__), key=values.__getitem__):
        members = list(tied)
        for k in members:
            result[k] = start + (len(members) + 1) / 2
        start += len(members)
    return result


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho: the Pearson correlation of the ranks; None when either side is constant."""
    import statistics  # here, not at the top: evaluators load this module, few need statistics

    try:
        return statistics.correlation(ranks(xs), ranks(ys))
    except statistics.StatisticsError:  # a side is constant, or the sides differ in length or have < 2 values
        return None


def mean_absolute_error(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    return sum(abs(a - b) for a, b in zip(xs, ys, strict=True)) / len(xs) if xs else None


def rogan_gladen(raw: float | None, true_pass_rate: float | None, true_fail_rate: float | None) -> float | None:
    """The pass rate people would give, from the judge's `raw` rate and its measured error:
    (raw + specificity - 1) / (sensitivity + specificity - 1), clipped to 0..1. None when the judge
    is no better than a coin (the denominator is not positive) or a rate is unknown."""
    if raw is None or true_pass_rate is None or true_fail_rate is None:
        return None
    informedness = true_pass_rate + true_fail_rate - 1
    if informedness <= 0:
        return None
    return min(1.0, max(0.0, (raw + true_fail_rate - 1) / informedness))
