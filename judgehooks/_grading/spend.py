"""Spend caps: `max_cost_usd` and `max_calls` per fixed UTC window (`per="minute"|"hour"|"day"`).

Counts are kept per budget (the evaluator's name, or a `budget=` name several evaluators share) and
per judge model. A run is admitted (counting its first judge call) before it is graded; a run that
would pass a cap is not judged: its record is `skipped` with reason "budget". Every further judge
call of that grading (a retry, a composite's next member) is admitted and counted on its own through
the grading's `Meter`; one refused ends the grading as an `error` record saying which cap stopped it.
A call's cost is added as soon as the judge answers.

Where the counts live (a `Ledger`): in this process by default; in a SQLite file that the processes
of one machine share with `spend_ledger=` (`spend_file.SQLiteLedger`); in Redis for `judgehooks worker`
processes grading an imported evaluator with `broker=`, so the whole fleet shares one count. Calls
in flight when a cap is reached still finish, so the cost cap can be passed by what they cost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from .._base.log import log

#: window lengths in seconds, by the name `per=` takes
PERIODS: Mapping[str, int] = {"minute": 60, "hour": 3600, "day": 86400}


@dataclass(frozen=True, slots=True)
class Ticket:
    """An admission: the window it counts in (its start, Unix seconds) and the counts seen then."""

    window: int
    calls: int = 0
    cost_usd: float = 0.0
    admitted: bool = True


class Ledger(Protocol):
    """Where a budget's counts live: `reserve` admits a call (counting it) unless a cap is reached."""

    async def reserve(self, key: str, period: int, max_calls: int | None, max_cost_usd: float | None) -> Ticket: ...

    async def add_cost(self, key: str, window: int, period: int, cost_usd: float) -> None: ...


class LocalLedger:
    """Counts in this process, shared by every evaluator in it that names the same budget."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, int], list[float]] = {}  # (key, window) -> [calls, cost]
        self._lock = threading.Lock()

    async def reserve(self, key: str, period: int, max_calls: int | None, max_cost_usd: float | None) -> Ticket:
        window = int(time.time()) // period * period
        with self._lock:
            if len(self._counts) > 1024:  # windows that ended: forget them
                self._counts = {k: v for k, v in self._counts.items() if k[1] + period * 2 > window}
            counts = self._counts.setdefault((key, window), [0, 0.0])
            calls, cost = int(counts[0]), counts[1]
            if (max_calls is not None and calls >= max_calls) or (max_cost_usd is not None and cost >= max_cost_usd):
                return Ticket(window, calls, cost, admitted=False)
            counts[0] += 1
            return Ticket(window, calls + 1, cost)

    async def add_cost(self, key: str, window: int, period: int, cost_usd: float) -> None:
        with self._lock:
            self._counts.setdefault((key, window), [0, 0.0])[1] += cost_usd


#: the ledger of every evaluator in this process that has no other
LOCAL = LocalLedger()


@dataclass
class SpendCap:
    """One evaluator's caps against its judge model's counts in `ledger`."""

    evaluator: str
    model: str
    per: str
    max_cost_usd: float | None = None
    max_calls: int | None = None
    budget: str | None = None  # shared by every evaluator naming it; else the evaluator's own
    ledger: Ledger = field(default=LOCAL, repr=False)
    skipped: int = 0
    _warned: dict[str, int] = field(default_factory=dict, repr=False)  # warning -> window it was logged in

    @property
    def key(self) -> str:
        return f"{self.budget or self.evaluator}\x1f{self.model}\x1f{self.per}"

    @property
    def period(self) -> int:
        return PERIODS[self.per]

    async def admit(self) -> Ticket:
        """Count this call, or refuse it (`admitted` False) when a cap is reached in this window."""
        ticket = await self.ledger.reserve(self.key, self.period, self.max_calls, self.max_cost_usd)
        if not ticket.admitted:
            self.skipped += 1
            cap = "max_calls" if self.max_calls is not None and ticket.calls >= self.max_calls else "max_cost_usd"
            self._warn_once("spend_cap_reached", ticket.window, cap=cap, limit=getattr(self, cap),
                            calls=ticket.calls, cost_usd=round(ticket.cost_usd, 6))
        return ticket

    async def charge(self, ticket: Ticket, cost_usd: float | None) -> None:
        """Add an admitted call's cost. Unknown (litellm has no price for the model): counted as 0."""
        if cost_usd is None:
            if self.max_cost_usd is not None:
                self._warn_once("spend_cap_cost_unknown", ticket.window,
                                note="no price is known for this judge model, so max_cost_usd counts its calls as "
                                     "0 USD; max_calls still holds (register a price with litellm.register_model)")
            return
        if cost_usd > 0:
            await self.ledger.add_cost(self.key, ticket.window, self.period, cost_usd)

    def details(self, ticket: Ticket) -> dict[str, Any]:
        """What a `skipped` record says about the cap it met."""
        return {"budget": {"name": self.budget or self.evaluator, "judge_model": self.model, "per": self.per,
                           "window_start": _iso(ticket.window), "resets_at": _iso(ticket.window + self.period),
                           "max_cost_usd": self.max_cost_usd, "max_calls": self.max_calls,
                           "calls": ticket.calls, "cost_usd": round(ticket.cost_usd, 6)}}

    def stats(self) -> dict[str, Any]:
        return {"over_budget": self.skipped}

    def _warn_once(self, event: str, window: int, **fields: Any) -> None:
        """One structured warning per event and window in this process."""
        if self._warned.get(event) == window:
            return
        self._warned[event] = window
        log.warning(event, evaluator=self.evaluator, budget=self.budget or self.evaluator, judge_model=self.model,
                    per=self.per, window_start=_iso(window), resets_at=_iso(window + self.period), **fields)


@dataclass
class Meter:
    """One grading's judge calls (`_base.metering.CallMeter`): each is admitted against the spend cap
    (the admission that let the run in paid for its first call; every later call is admitted and
    counted on its own), then waits its turn under `requests_per_minute` (`pace`)."""

    cap: SpendCap | None
    ticket: Ticket | None
    prepaid: bool = True
    charged: float = 0.0  # USD added through `add_cost`
    refused: Ticket | None = None
    pace: Any = None  # a `ratelimit.Pace`, or None

    async def admit_call(self) -> bool:
        if self.cap is not None:
            if self.prepaid:
                self.prepaid = False
            else:
                ticket = await self.cap.admit()
                if not ticket.admitted:
                    self.refused = ticket
                    return False
                self.ticket = ticket
        if self.pace is not None:
            await self.pace.wait()
        return True

    async def add_cost(self, cost_usd: float | None) -> None:
        if self.cap is not None and self.ticket is not None and cost_usd is not None and cost_usd > 0:
            await self.cap.charge(self.ticket, cost_usd)
            self.charged += cost_usd

    def refusal(self) -> str:
        assert self.cap is not None  # only a cap refuses
        ticket = self.refused or self.ticket
        assert ticket is not None
        budget = self.cap.details(ticket)["budget"]
        cap = "max_calls" if self.cap.max_calls is not None and ticket.calls >= self.cap.max_calls else "max_cost_usd"
        return (f"spend cap reached: {cap}={getattr(self.cap, cap)} per {self.cap.per} for budget {budget['name']!r} "
                f"({budget['calls']} calls, {budget['cost_usd']} USD this window; resets at {budget['resets_at']})")

    async def settle(self, cost_usd: float | None) -> None:
        """At the end of the grading: the part of its cost no call added (an evaluator that reports
        cost without asking through `JudgeCall`), or the unknown-price warning."""
        if self.cap is not None and self.ticket is not None:  # `charge` adds nothing of 0 or less
            await self.cap.charge(self.ticket, None if cost_usd is None else cost_usd - self.charged)


def _iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()
