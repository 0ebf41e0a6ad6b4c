"""Composites of evaluators: `Group` (concurrent, weighted, one pass rule) and `Ordered` (cheap
checks first; the first that fails decides before any later, costlier check runs).

Members are any `Evaluator`s; only the composite's own hook settings (store, callbacks,
background...) are used: the members are run through `run_evaluator` and build no store or
pipeline of their own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from typing import Any

import anyio

from .._base.context import EvalContext
from .._base.outcome import Outcome, add_usage, run_evaluator
from .._base.validate import check_choice, check_number
from ..exceptions import MemberError
from .base import Evaluator


def check_members(param: str, value: Any) -> tuple[Evaluator, ...]:
    """Validate a composite's members: evaluators with distinct names (details are keyed by name)."""
    items = (value,) if isinstance(value, Evaluator) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(f"{param} must be a non-empty list of judgehooks evaluators, got {value!r:.80}")
    for i, item in enumerate(items):
        if not isinstance(item, Evaluator):
            raise TypeError(f"{param}[{i}] must be a judgehooks Evaluator (e.g. Regex(...), AgentAsJudgeEval(...), "
                            f"an @evaluator function), got {type(item).__name__}")
    names = [m.evaluator_name for m in items]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{param} has several members named {duplicates}: give each a distinct name=")
    return tuple(items)


def normalised(outcome: Outcome, scale: float) -> float:
    """An outcome on a 0..1 scale: its score over the evaluator's full mark, else 1 or 0."""
    if outcome.score is not None:
        return outcome.score / scale
    return 1.0 if outcome.passed else 0.0


async def assess_calls(calls: Sequence[Callable[[EvalContext], Awaitable[Outcome]]],
                       ctx: EvalContext) -> list[Outcome]:
    """Run never-raising outcome calls concurrently; outcomes in the same order."""
    results: list[Outcome] = [Outcome()] * len(calls)

    async def one(i: int, call: Callable[[EvalContext], Awaitable[Outcome]]) -> None:
        results[i] = await call(ctx)

    async with anyio.create_task_group() as tg:
        for i, call in enumerate(calls):
            tg.start_soon(one, i, call)
    return results


async def assess_all(ctx: EvalContext, evaluators: Sequence[Evaluator]) -> list[Outcome]:
    """Ask every evaluator concurrently; outcomes in the same order."""
    return await assess_calls([partial(run_evaluator, ev) for ev in evaluators], ctx)


def member_error(what: str, failed: Sequence[tuple[str, Outcome]]) -> MemberError:
    name, outcome = failed[0]
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return MemberError(f"{what} {name!r} errored{more}: {type(outcome.error).__name__}: {outcome.error}")


PASS_RULES = ("all", "any", "score")


@dataclass(eq=False)
class Group(Evaluator):
    """Several evaluators on the same run, concurrently, with weights. The record's score is the
    weighted mean of the members' normalised scores (0..1); it passes when ``pass_rule`` holds:
    ``"all"`` members pass, ``"any"`` passes, or ``"score"`` >= ``threshold``. Each member's
    verdict is stored in ``details["members"]``."""

    members: Sequence[Evaluator | tuple[Evaluator, float]] | Mapping[Evaluator, float]
    _: KW_ONLY
    pass_rule: str = "all"
    weights: tuple[float, ...] = field(init=False, default=())

    mode = "numeric"

    def __post_init__(self) -> None:
        members, threshold, pass_rule = self.members, self.threshold, self.pass_rule
        if isinstance(members, Mapping):
            pairs = list(members.items())
        elif isinstance(members, (list, tuple)):
            pairs = [m if isinstance(m, tuple) and len(m) == 2 else (m, 1.0) for m in members]
        else:
            raise TypeError(f"members must be a list of evaluators or (evaluator, weight) pairs, or a mapping "
                            f"evaluator -> weight, got {type(members).__name__}")
        # the field keeps what users may pass (pairs, a mapping); the code reads the checked tuple
        self._members = self.members = check_members("members", [m for m, _ in pairs])
        for (member, weight) in pairs:
            check_number(f"weight of {member.evaluator_name!r}", weight, minimum=0, allow_equal=False)
        self.weights = tuple(float(w) for _, w in pairs)
        check_choice("pass_rule", pass_rule, PASS_RULES)
        if pass_rule == "score":
            if threshold is None:
                raise ValueError("pass_rule='score' needs threshold= (a weighted score from 0 to 1)")
            check_number("threshold", threshold, minimum=0, allow_equal=True)
        elif threshold is not None:
            raise ValueError(f"threshold is only used with pass_rule='score', not {pass_rule!r}")
        self.needs_tools = any(m.needs_tools for m in self._members)  # type: ignore[misc]  # ClassVar set per instance

    def default_name(self) -> str:
        return "group(" + ",".join(m.evaluator_name for m in self._members) + ")"

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        outcomes = await assess_all(ctx, self._members)
        lines = [o.summary(m.evaluator_name, weight=w)
                 for m, w, o in zip(self._members, self.weights, outcomes, strict=True)]
        errors = [(m.evaluator_name, o) for m, o in zip(self._members, outcomes, strict=True)
                  if o.status == "error"]
        failed = [m.evaluator_name for m, o in zip(self._members, outcomes, strict=True) if o.status == "failed"]
        graded = [(w, normalised(o, m.scale)) for m, w, o in zip(self._members, self.weights, outcomes, strict=True)
                  if o.status != "error"]
        score = round(sum(w * v for w, v in graded) / sum(w for w, _ in graded), 4) if graded else None
        details = {"pass_rule": self.pass_rule, "members": lines}
        usage = add_usage(outcomes)
        if self.pass_rule == "all" and failed:
            return Outcome(passed=False, score=score, reason=f"failed: {failed}", details=details, **usage)
        if self.pass_rule == "any" and len(failed) + len(errors) < len(outcomes):
            return Outcome(passed=True, score=score, reason="at least one member passed", details=details, **usage)
        if errors:
            return Outcome(error=member_error("member", errors), details=details, **usage)
        if self.pass_rule == "score":
            assert score is not None and self.pass_threshold is not None
            passed = score >= self.pass_threshold
            return Outcome(passed=passed, score=score, details=details, **usage,
                           reason=f"weighted score {score:g} {'>=' if passed else '<'} {self.pass_threshold:g}")
        passed = self.pass_rule == "all"
        return Outcome(passed=passed, score=score, reason="all members passed" if passed else f"failed: {failed}",
                       details=details, **usage)


@dataclass(eq=False)
class Ordered(Evaluator):
    """Checks run one after another, cheapest first: the first that fails (or errors) decides and
    the rest never run, so a failed regex costs no LLM call. When all pass, the last decides.
    ``details["decided_by"]`` names the deciding check; the record takes the last check's mode
    and threshold."""

    checks: Sequence[Evaluator]

    def __post_init__(self) -> None:
        self.checks = check_members("checks", self.checks)
        if self.threshold is not None:
            raise ValueError("Ordered takes its threshold from its last check; set it there")
        self.needs_tools = any(c.needs_tools for c in self.checks)  # type: ignore[misc]  # ClassVar set per instance
        last = self.checks[-1]
        self.mode, self.scale = last.mode, last.scale  # type: ignore[misc]  # ClassVar set per instance

    @property
    def pass_threshold(self) -> float | None:
        return self.checks[-1].pass_threshold

    def default_name(self) -> str:
        return "ordered(" + ",".join(c.evaluator_name for c in self.checks) + ")"

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        outcomes: list[Outcome] = []
        for check in self.checks:
            outcome = await run_evaluator(check, ctx)
            outcomes.append(outcome)
            if outcome.status != "passed":
                break
        decider = self.checks[len(outcomes) - 1]
        details = {"decided_by": decider.evaluator_name,
                   "checks": [o.summary(c.evaluator_name) for c, o in zip(self.checks, outcomes, strict=False)],
                   "not_run": [c.evaluator_name for c in self.checks[len(outcomes):]]}
        usage = add_usage(outcomes)
        if outcome.error is not None or outcome.passed is None:
            return Outcome(error=outcome.error or MemberError(f"{decider.evaluator_name!r} reached no verdict"),
                           details=details, **usage)
        return Outcome(passed=outcome.passed, score=outcome.score, reason=f"{decider.evaluator_name}: {outcome.reason}",
                       details=details, **usage)


AGGREGATES = ("mean", "majority")


def combine(samples: Sequence[tuple[Evaluator, Outcome]], *, aggregate: str, threshold: float | None,
            scale: float, min_successes: int) -> Outcome:
    """One verdict from many: majority vote, or the mean score held to `threshold`. Scores are on
    the judges' own scale when they share one (`scale`), else normalised to 0..1."""
    import statistics

    lines = [o.summary(j.evaluator_name, sample=i) for i, (j, o) in enumerate(samples)]
    good = [(j, o) for j, o in samples if o.status != "error"]
    usage = add_usage(o for _, o in samples)
    details: dict[str, Any] = {"aggregate": aggregate, "samples": lines, "errors": len(samples) - len(good)}
    if len(good) < min_successes:
        errors = [(j.evaluator_name, o) for j, o in samples if o.status == "error"]
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


@dataclass(eq=False)
class Ensemble(Evaluator):
    """Ask ``samples`` times each of one judge or several (e.g. different models), concurrently,
    and combine: ``aggregate="majority"`` (more than half pass) or ``"mean"`` (the mean score
    against ``threshold``, by default the judges' own). Every sample is in ``details["samples"]``
    with the ``spread`` (max - min score) and ``stdev``. At least ``min_successes`` samples (by
    default a majority) must reach a verdict, else the record is an error."""

    judges: Evaluator | Sequence[Evaluator]
    _: KW_ONLY
    samples: int = 1
    aggregate: str = "mean"
    min_successes: int | None = None

    mode = "numeric"

    def __post_init__(self) -> None:
        # the field keeps what users may pass (one evaluator or several); the code reads the checked tuple
        self._judges = self.judges = judges = check_members("judges", self.judges)
        samples, aggregate, threshold, min_successes = self.samples, self.aggregate, self.threshold, self.min_successes
        check_number("samples", samples, minimum=1, allow_equal=True, integer=True)
        check_choice("aggregate", aggregate, AGGREGATES)
        total = len(judges) * samples
        if total < 2:
            raise ValueError("an ensemble needs at least two samples: several judges, or samples >= 2")
        scales = {j.scale for j in judges}
        self.scale = next(iter(scales)) if len(scales) == 1 else 1.0  # type: ignore[misc]  # ClassVar set per instance
        if aggregate == "mean":
            binary = [j.evaluator_name for j in judges if j.mode != "numeric"]
            if binary:
                raise ValueError(f"aggregate='mean' needs numeric judges; {binary} give pass/fail only: "
                                 "use aggregate='majority'")
            if threshold is None:
                own = {j.pass_threshold for j in judges}
                if len(own) != 1 or None in own or len(scales) != 1:
                    raise ValueError("aggregate='mean' needs threshold=: the judges have different (or no) "
                                     "thresholds or scales")
                self.threshold = own.pop()
        elif threshold is not None:
            raise ValueError("threshold is only used with aggregate='mean'; a majority vote uses each "
                             "judge's own pass/fail")
        if min_successes is None:
            min_successes = total // 2 + 1
        check_number("min_successes", min_successes, minimum=1, allow_equal=True, integer=True)
        if min_successes > total:
            raise ValueError(f"min_successes ({min_successes}) is more than the {total} samples asked for")
        self._min_successes = self.min_successes = min_successes
        self.needs_tools = any(j.needs_tools for j in judges)  # type: ignore[misc]  # ClassVar set per instance

    def default_name(self) -> str:
        return f"ensemble({','.join(j.evaluator_name for j in self._judges)})x{self.samples}"

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        asked = [j for j in self._judges for _ in range(self.samples)]
        outcomes = await assess_all(ctx, asked)
        return combine(list(zip(asked, outcomes, strict=True)), aggregate=self.aggregate,
                       threshold=self.pass_threshold, scale=self.scale, min_successes=self._min_successes)


@dataclass(eq=False)
class Borderline(Evaluator):
    """Ask a numeric judge once; only when its score is within ``margin`` of the threshold, ask
    ``extra_samples`` more times and decide on the mean. ``details["reasked"]`` says which."""

    judge: Evaluator
    _: KW_ONLY
    margin: float = 1.0
    extra_samples: int = 2

    mode = "numeric"

    def __post_init__(self) -> None:
        judge = self.judge
        (self.judge,) = check_members("judge", judge)
        if judge.mode != "numeric" or judge.pass_threshold is None:
            raise ValueError("Borderline needs a numeric judge with a threshold, e.g. "
                             "AgentAsJudgeEval(scoring_strategy='numeric', threshold=7)")
        check_number("margin", self.margin, minimum=0, allow_equal=True)
        check_number("extra_samples", self.extra_samples, minimum=1, allow_equal=True, integer=True)
        if self.threshold is not None:
            raise ValueError("Borderline takes its threshold from its judge; set it there")
        self.scale = judge.scale  # type: ignore[misc]  # ClassVar set per instance
        self.needs_tools = judge.needs_tools  # type: ignore[misc]  # ClassVar set per instance

    @property
    def pass_threshold(self) -> float | None:
        return self.judge.pass_threshold

    def default_name(self) -> str:
        return f"borderline({self.judge.evaluator_name})"

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        judge, threshold = self.judge, self.pass_threshold
        assert threshold is not None
        first = await run_evaluator(judge, ctx)
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
