"""The seam between a spend cap and the judge calls it counts: the grading that admitted a run sets
`current_meter`, and the ONE loop every LLM-judge call goes through (`JudgeCall.ask`: retries,
composite members, sessions, helper judge processes) asks it before each call. So `max_calls` counts
judge calls, retries included, on every path, without the judge code knowing the ledger.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol


class CallMeter(Protocol):
    """One grading's judge calls against its spend cap."""

    async def admit_call(self) -> bool:
        """Count one more judge call; False (nothing counted) when a cap is reached: do not call."""

    async def add_cost(self, cost_usd: float | None) -> None:
        """Add a call's cost as soon as it is known."""

    def refusal(self) -> str:
        """Why the last `admit_call` said no: the cap, its limit and when the window resets."""


#: the meter of the grading running in this task (None: no spend cap, every call goes ahead)
current_meter: ContextVar[CallMeter | None] = ContextVar("judgehooks_meter", default=None)
