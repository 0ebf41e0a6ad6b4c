"""Composites of evaluators: `Group` (concurrent, weighted, one pass rule) and `Ordered` (cheap
checks first; the first that fails decides before any later, costlier check runs).

Members are any `Evaluator`s; only the composite's own hook settings (store, callbacks,
background...) are used: the members are asked through `assess` and store nothing themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio

from ._context import EvalContext
from ._errors import MemberError
from ._evaluator import Evaluator
from ._outcome import Outcome, add_usage
from ._validate import check_choice, check_number


def check_members(param: str, value: Any) -> tuple[Evaluator, ...]:
    """Validate a composite's members: evaluators with distinct names (details are keyed by name)."""
    items = (value,) if isinstance(value, Evaluator) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(f"{param} must be a non-empty list of judgehooks evaluators, got {value!r:.80}")
    for i, item in enumerate(items):
        if not isinstance(item, Evaluator):
            raise TypeError(f"{param}[{i}] must be a judgehooks Evaluator (e.g. Regex(...), AgentAsJudgeEval(...), "
                            f"an @evaluator function), got {type(item).__name__}")
    names = [m.evaluator for m in items]
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
    return await assess_calls([ev.assess for ev in evaluators], ctx)


def member_error(what: str, failed: Sequence[tuple[str, Outcome]]) -> MemberError:
    name, outcome = failed[0]
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return MemberError(f"{what} {name!r} errored{more}: {type(outcome.error).__name__}: {outcome.error}")


PASS_RULES = ("all", "any", "score")


class Group(Evaluator):
    """Several evaluators on the same run, concurrently, with weights. The record's score is the
    weighted mean of the members' normalised scores (0..1); it passes when ``pass_rule`` holds:
    ``"all"`` members pass, ``"any"`` passes, or ``"score"`` >= ``threshold``. Each member's
    verdict is stored in ``details["members"]``."""

    mode = "numeric"

    def __init__(self, members: Sequence[Evaluator | tuple[Evaluator, float]] | Mapping[Evaluator, float], *,
                 pass_rule: str = "all", threshold: float | None = None, **hook: Any) -> None:
        if isinstance(members, Mapping):
            pairs = list(members.items())
        elif isinstance(members, (list, tuple)):
            pairs = [m if isinstance(m, tuple) and len(m) == 2 else (m, 1.0) for m in members]
        else:
            raise TypeError(f"members must be a list of evaluators or (evaluator, weight) pairs, or a mapping "
                            f"evaluator -> weight, got {type(members).__name__}")
        self.members = check_members("members", [m for m, _ in pairs])
        for (member, weight) in pairs:
            check_number(f"weight of {member.evaluator!r}", weight, minimum=0, allow_equal=False)
        self.weights = tuple(float(w) for _, w in pairs)
        check_choice("pass_rule", pass_rule, PASS_RULES)
        if pass_rule == "score":
            if threshold is None:
                raise ValueError("pass_rule='score' needs threshold= (a weighted score from 0 to 1)")
            check_number("threshold", threshold, minimum=0, allow_equal=True)
        elif threshold is not None:
            raise ValueError(f"threshold is only used with pass_rule='score', not {pass_rule!r}")
        self.pass_rule = pass_rule
        self.needs_tools = any(m.needs_tools for m in self.members)
        super().__init__(threshold=threshold, **hook)

    def default_name(self) -> str:
        return "group(" + ",".join(m.evaluator for m in self.members) + ")"

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        outcomes = await assess_all(ctx, self.members)
        lines = [o.summary(m.evaluator, weight=w) for m, w, o in zip(self.members, self.weights, outcomes, strict=True)]
        errors = [(m.evaluator, o) for m, o in zip(self.members, outcomes, strict=True) if o.status == "error"]
        failed = [m.evaluator for m, o in zip(self.members, outcomes, strict=True) if o.status == "failed"]
        graded = [(w, normalised(o, m.scale)) for m, w, o in zip(self.members, self.weights, outcomes, strict=True)
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


class Ordered(Evaluator):
    """Checks run one after another, cheapest first: the first that fails (or errors) decides and
    the rest never run, so a failed regex costs no LLM call. When all pass, the last decides.
    ``details["decided_by"]`` names the deciding check; the record takes the last check's mode
    and threshold."""

    def __init__(self, checks: Sequence[Evaluator], **hook: Any) -> None:
        self.checks = check_members("checks", checks)
        if "threshold" in hook:
            raise ValueError("Ordered takes its threshold from its last check; set it there")
        self.needs_tools = any(c.needs_tools for c in self.checks)
        super().__init__(**hook)
        last = self.checks[-1]
        self.mode, self.pass_threshold, self.scale = last.mode, last.pass_threshold, last.scale  # type: ignore[misc]

    def default_name(self) -> str:
        return "ordered(" + ",".join(c.evaluator for c in self.checks) + ")"

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        outcomes: list[Outcome] = []
        for check in self.checks:
            outcome = await check.assess(ctx)
            outcomes.append(outcome)
            if outcome.status != "passed":
                break
        decider = self.checks[len(outcomes) - 1]
        details = {"decided_by": decider.evaluator,
                   "checks": [o.summary(c.evaluator) for c, o in zip(self.checks, outcomes, strict=False)],
                   "not_run": [c.evaluator for c in self.checks[len(outcomes):]]}
        usage = add_usage(outcomes)
        if outcome.error is not None or outcome.passed is None:
            return Outcome(error=outcome.error or MemberError(f"{decider.evaluator!r} reached no verdict"),
                           details=details, **usage)
        return Outcome(passed=outcome.passed, score=outcome.score, reason=f"{decider.evaluator}: {outcome.reason}",
                       details=details, **usage)
