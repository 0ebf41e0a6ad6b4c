"""Several verdicts for one run: `Ensemble` (k samples of a judge, or several judges; majority
or mean; the spread stored) and `Borderline` (ask again only when a score lands near the
threshold). Errored samples are reported, never counted as failures."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from ._composite import assess_all, check_members, normalised
from ._context import EvalContext
from ._errors import MemberError
from ._evaluator import Evaluator
from ._outcome import Outcome, add_usage
from ._validate import check_choice, check_number

AGGREGATES = ("mean", "majority")


def combine(samples: Sequence[tuple[Evaluator, Outcome]], *, aggregate: str, threshold: float | None,
            scale: float, min_successes: int) -> Outcome:
    """One verdict from many: majority vote, or the mean score held to `threshold`. Scores are on
    the judges' own scale when they share one (`scale`), else normalised to 0..1."""
    lines = [o.summary(j.evaluator, sample=i) for i, (j, o) in enumerate(samples)]
    good = [(j, o) for j, o in samples if o.status != "error"]
    usage = add_usage(o for _, o in samples)
    details: dict[str, Any] = {"aggregate": aggregate, "samples": lines, "errors": len(samples) - len(good)}
    if len(good) < min_successes:
        errors = [(j.evaluator, o) for j, o in samples if o.status == "error"]
        error = member_error_for(errors, len(good), len(samples), min_successes)
        return Outcome(error=error, details=details, **usage)
    scores = [(o.score if j.scale == scale else normalised(o, j.scale) * scale) for j, o in good
              if o.score is not None]
    votes = sum(1 for _, o in good if o.passed)
    details["votes"] = {"passed": votes, "failed": len(good) - votes}
    if scores:
        details["spread"] = round(max(scores) - min(scores), 4)
        details["stdev"] = round(statistics.pstdev(scores), 4)
    if aggregate == "majority":
        passed = votes * 2 > len(good)
        score = round(statistics.mean(scores), 4) if len(scores) == len(good) else round(votes / len(good), 4)
        reason = f"{votes} of {len(good)} samples passed (majority)"
    else:
        assert threshold is not None and len(scores) == len(good)
        score = round(statistics.mean(scores), 4)
        passed = score >= threshold
        reason = f"mean score {score:g} over {len(good)} samples {'>=' if passed else '<'} {threshold:g}"
    if "spread" in details:
        reason += f", spread {details['spread']:g}"
    return Outcome(passed=passed, score=score, reason=reason, details=details, **usage)


def member_error_for(errors: Sequence[tuple[str, Outcome]], good: int, total: int, needed: int) -> MemberError:
    name, outcome = errors[0]
    return MemberError(f"only {good} of {total} samples reached a verdict (need {needed}); {name!r} errored: "
                       f"{type(outcome.error).__name__}: {outcome.error}")


class Ensemble(Evaluator):
    """Ask ``samples`` times each of one judge or several (e.g. different models), concurrently,
    and combine: ``aggregate="majority"`` (more than half pass) or ``"mean"`` (the mean score
    against ``threshold``, by default the judges' own). Every sample is in ``details["samples"]``
    with the ``spread`` (max - min score) and ``stdev``. At least ``min_successes`` samples (by
    default a majority) must reach a verdict, else the record is an error."""

    mode = "numeric"

    def __init__(self, judges: Evaluator | Sequence[Evaluator], *, samples: int = 1, aggregate: str = "mean",
                 threshold: float | None = None, min_successes: int | None = None, **hook: Any) -> None:
        self.judges = check_members("judges", judges)
        check_number("samples", samples, minimum=1, allow_equal=True, integer=True)
        check_choice("aggregate", aggregate, AGGREGATES)
        total = len(self.judges) * samples
        if total < 2:
            raise ValueError("an ensemble needs at least two samples: several judges, or samples >= 2")
        scales = {j.scale for j in self.judges}
        self.scale = next(iter(scales)) if len(scales) == 1 else 1.0  # type: ignore[misc]
        if aggregate == "mean":
            binary = [j.evaluator for j in self.judges if j.mode != "numeric"]
            if binary:
                raise ValueError(f"aggregate='mean' needs numeric judges; {binary} give pass/fail only: "
                                 "use aggregate='majority'")
            if threshold is None:
                own = {j.pass_threshold for j in self.judges}
                if len(own) != 1 or None in own or len(scales) != 1:
                    raise ValueError("aggregate='mean' needs threshold=: the judges have different (or no) "
                                     "thresholds or scales")
                threshold = own.pop()
        elif threshold is not None:
            raise ValueError("threshold is only used with aggregate='mean'; a majority vote uses each "
                             "judge's own pass/fail")
        if min_successes is None:
            min_successes = total // 2 + 1
        check_number("min_successes", min_successes, minimum=1, allow_equal=True, integer=True)
        if min_successes > total:
            raise ValueError(f"min_successes ({min_successes}) is more than the {total} samples asked for")
        self.samples, self.aggregate, self.min_successes = samples, aggregate, min_successes
        self.needs_tools = any(j.needs_tools for j in self.judges)
        super().__init__(threshold=threshold, **hook)

    def default_name(self) -> str:
        return f"ensemble({','.join(j.evaluator for j in self.judges)})x{self.samples}"

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        asked = [j for j in self.judges for _ in range(self.samples)]
        outcomes = await assess_all(ctx, asked)
        return combine(list(zip(asked, outcomes, strict=True)), aggregate=self.aggregate,
                       threshold=self.pass_threshold, scale=self.scale, min_successes=self.min_successes)


class Borderline(Evaluator):
    """Ask a numeric judge once; only when its score is within ``margin`` of the threshold, ask
    ``extra_samples`` more times and decide on the mean. ``details["reasked"]`` says which."""

    mode = "numeric"

    def __init__(self, judge: Evaluator, *, margin: float = 1.0, extra_samples: int = 2, **hook: Any) -> None:
        (self.judge_evaluator,) = check_members("judge", judge)
        if judge.mode != "numeric" or judge.pass_threshold is None:
            raise ValueError("Borderline needs a numeric judge with a threshold, e.g. "
                             "AgentAsJudgeEval(scoring_strategy='numeric', threshold=7)")
        check_number("margin", margin, minimum=0, allow_equal=True)
        check_number("extra_samples", extra_samples, minimum=1, allow_equal=True, integer=True)
        if "threshold" in hook:
            raise ValueError("Borderline takes its threshold from its judge; set it there")
        self.margin, self.extra_samples = margin, extra_samples
        self.scale = judge.scale  # type: ignore[misc]
        self.needs_tools = judge.needs_tools
        super().__init__(threshold=judge.pass_threshold, **hook)

    def default_name(self) -> str:
        return f"borderline({self.judge_evaluator.evaluator})"

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        judge, threshold = self.judge_evaluator, self.pass_threshold
        assert threshold is not None
        first = await judge.assess(ctx)
        if first.status == "error" or first.score is None or abs(first.score - threshold) > self.margin:
            return Outcome(passed=first.passed, score=first.score, reason=first.reason, error=first.error,
                           details={**first.details, "reasked": False, "first_score": first.score},
                           **add_usage([first]))
        more = await assess_all(ctx, [judge] * self.extra_samples)
        combined = combine([(judge, first)] + [(judge, o) for o in more], aggregate="mean", threshold=threshold,
                           scale=self.scale, min_successes=1)
        return Outcome(passed=combined.passed, score=combined.score, reason=combined.reason, error=combined.error,
                       details={**combined.details, "reasked": True, "first_score": first.score},
                       **add_usage([first, *more]))
