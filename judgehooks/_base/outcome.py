"""Outcome: what one evaluator concluded about one run, and how user return values become one.

An evaluator's `evaluate(ctx)` may return a bool (pass/fail), a number (a score, thresholded by
the evaluator), an `Outcome`, a mapping with passed/score/reason, a judgehooks `Verdict` or an
agno `Score`. Anything else is an error outcome naming the evaluator and the type it returned.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import anyio.to_thread

from ..exceptions import BadOutcome

#: the longest reason a record keeps, in characters: a judge's reply is not trusted to be short
MAX_REASON_CHARS = 4096


def clip_reason(reason: Any) -> Any:
    """A reason longer than MAX_REASON_CHARS cut to that length, ending with a marker saying so."""
    if not isinstance(reason, str) or len(reason) <= MAX_REASON_CHARS:
        return reason
    marker = f" … [clipped from {len(reason)} characters]"
    return reason[:MAX_REASON_CHARS - len(marker)] + marker


@dataclass(frozen=True, slots=True)
class Outcome:
    """A verdict (``passed`` and/or ``score``, a ``reason``, per-check ``details``) or an ``error``.

    The judge fields (attempts, model, tokens, cost) are filled by evaluators that call a model.
    """

    passed: bool | None = None
    score: float | None = None
    reason: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    error: BaseException | None = None
    attempts: int = 0
    judge_model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    #: the settings the verdict was reached under (criteria, mode, threshold), when the evaluator
    #: reports them: the record states these, even if a setting was assigned while it was judging
    used: Mapping[str, Any] | None = None

    @property
    def status(self) -> Literal["passed", "failed", "error"]:
        if self.error is not None or self.passed is None:
            return "error"
        return "passed" if self.passed else "failed"

    def summary(self, name: str, **extra: Any) -> dict[str, Any]:
        """A JSON-ready line for a composite's details: one child's verdict or error."""
        line: dict[str, Any] = {"name": name, **extra, "status": self.status, "score": self.score,
                                "passed": self.passed, "reason": clip_reason(self.reason)}
        if self.error is not None:
            line["error"] = f"{type(self.error).__name__}: {self.error}"
        if self.details:
            line["details"] = dict(self.details)
        return line


def add_usage(parts: Iterable[Outcome]) -> dict[str, Any]:
    """The judge usage of several outcomes summed, for a composite's own outcome."""
    parts = list(parts)

    def total(attr: str) -> Any:
        values = [getattr(p, attr) for p in parts if getattr(p, attr) is not None]
        return sum(values) if values else None

    models = sorted({p.judge_model for p in parts if p.judge_model})
    return {"attempts": sum(p.attempts for p in parts), "prompt_tokens": total("prompt_tokens"),
            "completion_tokens": total("completion_tokens"), "cost_usd": total("cost_usd"),
            "judge_model": ",".join(models) or None}


def to_outcome(value: Any, *, evaluator: str, threshold: float | None) -> Outcome:
    """Read what an evaluator returned; a score without a pass decision is held to `threshold`."""
    if isinstance(value, Outcome):
        outcome = value
    elif isinstance(value, bool):
        outcome = Outcome(passed=value)
    elif isinstance(value, (int, float)):
        outcome = Outcome(score=float(value))
    elif isinstance(value, Mapping) and ("passed" in value or "score" in value):
        unknown = set(value) - {"passed", "score", "reason", "details"}
        if unknown:
            raise BadOutcome(f"evaluator {evaluator!r} returned a mapping with unknown keys {sorted(unknown)}; "
                             "allowed: passed, score, reason, details")
        outcome = Outcome(passed=value.get("passed"), score=value.get("score"), reason=value.get("reason"),
                          details=dict(value.get("details") or {}))
    elif hasattr(value, "value") and hasattr(value, "passed") and hasattr(value, "detail"):  # agno Score
        outcome = Outcome(passed=value.passed, score=value.value, reason=value.reason, details=dict(value.detail or {}))
    elif hasattr(value, "passed") and hasattr(value, "score") and hasattr(value, "reason"):  # Verdict
        outcome = Outcome(passed=value.passed, score=value.score, reason=value.reason)
    else:
        raise BadOutcome(f"evaluator {evaluator!r} returned {type(value).__name__} ({value!r:.80}); return a bool, "
                         "a number, a dict with passed/score/reason, or a judgehooks.Outcome")
    if outcome.error is not None:
        return outcome
    if outcome.passed is not None and not isinstance(outcome.passed, bool):
        raise BadOutcome(f"evaluator {evaluator!r} returned passed={outcome.passed!r}; it must be True or False")
    if outcome.score is not None:
        score = outcome.score
        if isinstance(score, bool) or not isinstance(score, (int, float)) or score != score:
            raise BadOutcome(f"evaluator {evaluator!r} returned score={score!r}; it must be a number (not NaN)")
        if outcome.passed is None:
            if threshold is None:
                raise BadOutcome(f"evaluator {evaluator!r} returned a score ({score!r}) but has no threshold to "
                                 "decide pass or fail: give it threshold=..., or return a bool")
            outcome = replace(outcome, passed=score >= threshold)
    if outcome.passed is None:
        raise BadOutcome(f"evaluator {evaluator!r} returned neither passed nor score")
    return outcome


class Runnable(Protocol):
    """What `run_evaluator` needs: a name for messages, a threshold for bare scores, `evaluate`."""

    @property
    def evaluator_name(self) -> str: ...

    @property
    def pass_threshold(self) -> float | None: ...

    def evaluate(self, ctx: Any) -> Any: ...


def _is_async(function: Any) -> bool:
    """`inspect.iscoroutinefunction`, with a plain ``async def`` (every built-in evaluator's) read from
    its code's flags, the one test that stays true to a function whose code is swapped later."""
    code = getattr(function, "__code__", None)
    if code is not None and code.co_flags & inspect.CO_COROUTINE:
        return True
    return inspect.iscoroutinefunction(function)


async def run_evaluator(evaluator: Runnable, ctx: Any) -> Outcome:
    """Run `evaluator.evaluate(ctx)` (awaited if async, else on a worker thread) and read its
    result. Never raises: an exception, or a return value that is no verdict, is an error outcome."""
    try:
        evaluate = evaluator.evaluate
        if _is_async(getattr(evaluate, "__func__", evaluate)):
            value = await evaluate(ctx)
        else:
            value = await anyio.to_thread.run_sync(evaluate, ctx)
        return to_outcome(value, evaluator=evaluator.evaluator_name, threshold=evaluator.pass_threshold)
    except Exception as exc:
        return Outcome(error=exc)
