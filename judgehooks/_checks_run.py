"""Checks on what the run did, no LLM call: its tool calls (team members' included, in the order
they started) and its latency, token and cost budgets from agno's run metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._context import EvalContext
from ._errors import MissingMetrics
from ._evaluator import Evaluator
from ._outcome import Outcome
from ._validate import check_number, check_strings


class ToolUse(Evaluator):
    """Passes when every tool in ``called`` was called (and, with ``succeeded=True``, at least one
    call of it did not error), in the given order when ``in_order=True``, and no tool in
    ``forbidden`` was called. A team run's member calls count."""

    def __init__(self, called: str | Sequence[str] = (), *, succeeded: bool = True, in_order: bool = False,
                 forbidden: str | Sequence[str] = (), **hook: Any) -> None:
        self.called = check_strings("called", called, allow_empty=True)
        self.forbidden = check_strings("forbidden", forbidden, allow_empty=True)
        if not self.called and not self.forbidden:
            raise ValueError("ToolUse needs called=[...] and/or forbidden=[...]; with neither it checks nothing")
        both = set(self.called) & set(self.forbidden)
        if both:
            raise ValueError(f"tools {sorted(both)} are both in called and forbidden")
        self.succeeded = bool(succeeded)
        self.in_order = bool(in_order)
        self._rebuild = {"called": list(self.called), "succeeded": self.succeeded, "in_order": self.in_order,
                         "forbidden": list(self.forbidden)}
        super().__init__(**hook)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        calls = [c for c in ctx.tool_calls if not (self.succeeded and c.error)]
        names = [c.name for c in calls]
        problems: list[str] = []
        missing = [n for n in self.called if n not in names]
        if missing:
            errored = {c.name for c in ctx.tool_calls if c.error} & set(missing)
            problems.append(f"not called{' successfully' if self.succeeded else ''}: {missing}"
                            + (f" ({sorted(errored)} errored)" if errored else ""))
        elif self.in_order:
            firsts = [names.index(n) for n in self.called]
            if firsts != sorted(firsts):
                actual = sorted(self.called, key=lambda n: names.index(n))
                problems.append(f"called in the order {actual}, required {list(self.called)}")
        used = [n for n in self.forbidden if any(c.name == n for c in ctx.tool_calls)]
        if used:
            problems.append(f"forbidden tools called: {used}")
        trajectory = [{"name": c.name, "error": c.error, "agent_id": c.agent_id} for c in ctx.tool_calls]
        return Outcome(passed=not problems, reason="; ".join(problems) or f"tool calls as required: {names}",
                       details={"calls": trajectory})


class Budget(Evaluator):
    """Passes when the run stayed within every limit given: ``max_latency_ms`` (time until its
    post hooks ran), ``max_tokens`` (input + output), ``max_cost_usd``. A figure the run's metrics
    do not have is an error, never a pass."""

    needs_tools = False

    def __init__(self, *, max_latency_ms: float | None = None, max_tokens: int | None = None,
                 max_cost_usd: float | None = None, **hook: Any) -> None:
        limits = {"latency_ms": max_latency_ms, "total_tokens": max_tokens, "cost_usd": max_cost_usd}
        for key, value in limits.items():
            if value is not None:
                check_number(f"max_{'tokens' if key == 'total_tokens' else key}", value, minimum=0,
                             allow_equal=True, integer=key == "total_tokens")
        self.limits = {k: v for k, v in limits.items() if v is not None}
        if not self.limits:
            raise ValueError("Budget needs at least one of max_latency_ms, max_tokens, max_cost_usd")
        self._rebuild = {"max_latency_ms": max_latency_ms, "max_tokens": max_tokens, "max_cost_usd": max_cost_usd}
        super().__init__(**hook)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        usage = ctx.usage
        details: dict[str, Any] = {}
        over: list[str] = []
        for key, limit in self.limits.items():
            actual = None if usage is None else getattr(usage, key)
            if actual is None:
                raise MissingMetrics(f"{self.evaluator}: the run's metrics have no {key} "
                                     f"({'no metrics at all' if usage is None else 'not reported by the model'})")
            details[key] = {"limit": limit, "actual": actual}
            if actual > limit:
                over.append(f"{key} {actual:g} > {limit:g}")
        return Outcome(passed=not over, reason="; ".join(over) or "within budget", details=details)
