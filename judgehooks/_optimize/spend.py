"""One optimization's spend: every model call it makes (the agent's runs, the judges' calls, the
reflection model's) counted against `max_calls` and `max_cost_usd` for the whole run.

It is the judges' `CallMeter` while a case is graded (so every judge attempt, retries included, is
admitted through the one loop all judge calls take), and gepa's stopper between iterations.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .settings import check_settings

KINDS = ("agent", "judge", "reflection")


@dataclass
class Spend:
    """Counts and caps for one optimization. Thread-safe: gepa asks from its thread, the calls are
    counted on the judgehooks loop."""

    max_cost_usd: float | None = None
    max_calls: int | None = None
    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    cost_usd: float = 0.0
    unpriced: int = 0  # calls whose cost no one reported (counted as 0 USD)
    reflection_errors: int = 0  # failed reflection calls in a row (3 end the search)
    reflection_failures: int = 0  # failed reflection calls in all
    reflection_answers: int = 0  # reflection calls answered
    last_reflection_error: str | None = None  # why the last one failed: kind, URL, message (credentials masked)
    interrupted: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        check_settings(max_cost_usd=self.max_cost_usd, max_calls=self.max_calls)

    def reached(self) -> str | None:
        """The cap this optimization has reached, or None."""
        total = sum(self.calls.values())
        if self.max_calls is not None and total >= self.max_calls:
            return "max_calls"
        if self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd:
            return "max_cost_usd"
        return None

    def admit(self, kind: str) -> bool:
        """Count one call of `kind`, unless a cap is reached (then nothing is counted)."""
        with self._lock:
            if self.reached() is not None:
                return False
            self.calls[kind] += 1
            return True

    def charge(self, cost_usd: float | None) -> None:
        with self._lock:
            if cost_usd is None:
                self.unpriced += 1
            elif cost_usd > 0:
                self.cost_usd += cost_usd

    def refusal(self) -> str:
        cap = self.reached() or "max_calls"
        return (f"the optimization's spend cap {cap}={getattr(self, cap)} is reached "
                f"({sum(self.calls.values())} calls, {round(self.cost_usd, 6)} USD)")

    # the judges' CallMeter (`_base.metering`): every judge attempt of a grading asks first
    async def admit_call(self) -> bool:
        return self.admit("judge")

    async def add_cost(self, cost_usd: float | None) -> None:
        self.charge(cost_usd)

    # gepa's stopper: asked between iterations
    def __call__(self, state: Any = None) -> bool:
        return self.stop_reason() is not None

    def stop_reason(self) -> str | None:
        if self.interrupted:
            return "interrupted"
        if self.reflection_errors >= 3:
            return "reflection_failed"
        return self.reached()

    def summary(self) -> dict[str, Any]:
        return {"calls": dict(self.calls), "cost_usd": round(self.cost_usd, 6), "unpriced_calls": self.unpriced,
                "max_calls": self.max_calls, "max_cost_usd": self.max_cost_usd,
                "reflection_answers": self.reflection_answers, "reflection_failures": self.reflection_failures}
