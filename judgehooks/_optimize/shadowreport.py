"""`shadow_report(store, name)`: what a `Shadow`'s comparisons say, and whether to promote the candidate.

Over the graded records of the shadow (``details["winner"]``: "candidate", "live" or "tie"; `error`
and `skipped` records are counted apart, never as a loss):

- the candidate's win rate is ``wins / (wins + losses)``: ties are left out, as the sign test
  leaves them out; its 95% interval is Wilson's score interval;
- the exact two-sided sign test (binomial, p = 1/2) of wins against losses;
- the decision: ``promote`` when the candidate wins significantly more often (p < 0.05, wins >
  losses), ``keep`` when it loses significantly more often (p < 0.05, losses > wins), else
  ``not enough data``, with `needed`: how many more comparisons would reach p < 0.05 if they went as
  these went (the same win rate among decisive ones, the same share of ties). With no decisive
  comparison yet, or a win rate of exactly 1/2, nothing extrapolates: `needed` is the least number of
  decisive comparisons that could ever be significant (6, all one way), counted from those so far.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .._base.record import EvalRecord
from .._base.stats import wilson
from .._runtime import runtime
from ..stores._base import Store, iter_records
from ..stores._url import default_store
from .stats import ALPHA, sign_test

#: the fewest decisive comparisons whose sign test can reach p < ALPHA (all one way: 2 / 2**6 < 0.05)
MIN_DECISIVE = 6
#: no more than this many comparisons are ever suggested (a difference too small to show)
MAX_NEEDED = 1_000_000
#: the version of records that carry none
UNVERSIONED = "unversioned"
#: the record fields a report is segmented by, besides any metadata key
SEGMENT_FIELDS = ("agent_id", "agent_name", "team_id", "user_id", "session_id")


def more_needed(wins: int, losses: int, ties: int, alpha: float = ALPHA) -> int | None:
    """How many more comparisons (ties included) would make the sign test significant if they went as
    these went; None when no number would (the win rate is exactly 1/2 over decisive comparisons)."""
    decisive = wins + losses
    comparisons = decisive + ties
    if decisive and sign_test(wins, losses) < alpha:
        return 0
    if decisive == 0:
        return MIN_DECISIVE  # no rate to extrapolate: the fewest decisive comparisons that could be significant
    if 2 * wins == decisive:
        return None  # a win rate of exactly 1/2: more of the same never differs
    rate, share = wins / decisive, decisive / comparisons
    low, high = decisive, decisive
    while True:  # the first decisive total at which the same rate is significant (doubling, then halving)
        high = max(high * 2, MIN_DECISIVE)
        if _significant(rate, high, alpha):
            break
        low = high
        if high > MAX_NEEDED:
            return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if _significant(rate, mid, alpha) else (mid, high)
    return max(1, math.ceil(high / share) - comparisons)


def _significant(rate: float, n: int, alpha: float) -> bool:
    won = round(rate * n)
    return sign_test(won, n - won) < alpha


@dataclass(frozen=True)
class Tally:
    """Comparisons, wins, losses and ties of one group, and the candidate's win rate (ties left out)."""

    comparisons: int = 0
    wins: int = 0
    losses: int = 0
    ties: int = 0
    errors: int = 0
    skipped: int = 0

    @property
    def win_rate(self) -> float | None:
        decisive = self.wins + self.losses
        return self.wins / decisive if decisive else None

    def row(self) -> dict[str, Any]:
        interval = wilson(self.wins, self.wins + self.losses)
        return {**asdict(self), "win_rate": self.win_rate, "interval": None if interval is None else list(interval)}


def _add(tally: Tally, record: EvalRecord) -> Tally:
    status = record.status
    if status == "error":
        return Tally(**{**asdict(tally), "errors": tally.errors + 1})
    if status == "skipped":
        return Tally(**{**asdict(tally), "skipped": tally.skipped + 1})
    winner = record.details.get("winner") if isinstance(record.details, dict) else None
    key = {"candidate": "wins", "live": "losses", "tie": "ties"}.get(str(winner))
    if key is None:
        return Tally(**{**asdict(tally), "errors": tally.errors + 1})  # graded, but no winner: not a comparison
    counts = asdict(tally)
    counts[key] += 1
    counts["comparisons"] += 1
    return Tally(**counts)


@dataclass(frozen=True)
class ShadowReport:
    """What a shadow's comparisons say. `decision` is "promote", "keep" or "not enough data"."""

    name: str
    version: str | None  # the Shadow version reported (its candidate, criteria and judge): the newest by default
    versions: list[str]  # every version the store holds under `name`, newest first
    comparisons: int
    wins: int
    losses: int
    ties: int
    errors: int
    skipped: int
    win_rate: float | None
    interval: tuple[float, float] | None
    p_value: float | None
    decision: str
    needed: int | None
    note: str
    segments: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["interval"] = None if self.interval is None else list(self.interval)
        return data


def decide(tally: Tally, alpha: float = ALPHA) -> tuple[str, float | None, int | None, str]:
    """(decision, p-value, more comparisons needed, a sentence saying why)."""
    decisive = tally.wins + tally.losses
    p = sign_test(tally.wins, tally.losses) if decisive else None
    if p is not None and p < alpha:
        better = tally.wins > tally.losses
        return ("promote" if better else "keep", p, 0,
                f"the candidate {'wins' if better else 'loses'} {max(tally.wins, tally.losses)} of {decisive} decisive "
                f"comparisons (p={p:.3g} by an exact two-sided sign test, ties left out; below {alpha} is needed)")
    needed = more_needed(tally.wins, tally.losses, tally.ties, alpha)
    if decisive == 0:
        why = ("no comparison yet" if tally.comparisons == 0 else
               f"all {tally.comparisons} comparison(s) are ties: the sign test leaves ties out")
        return ("not enough data", None, needed,
                f"{why}; at least {needed} decisive comparisons, all one way, are needed (ties do not count)")
    if needed is None:
        return ("not enough data", p, None,
                f"the candidate wins exactly half of {decisive} decisive comparisons (p={p:.3g}): more of the same "
                "never shows a difference")
    return ("not enough data", p, needed,
            f"p={p:.3g} over {decisive} decisive comparison(s) (below {alpha} is needed); about {needed} more "
            "comparison(s) going as these went would reach it")


async def ashadow_report(store: Store | None, name: str, *, by: Sequence[str] = ("agent_id", "user_id"),
                         version: str | None = None, alpha: float = ALPHA) -> ShadowReport:
    """`shadow_report` for async callers."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be the Shadow's name (its records' evaluator), got {name!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")
    store = store if store is not None else default_store()
    total = Tally()
    segments: dict[str, dict[str, Tally]] = {key: {} for key in by}
    records = [r async for r in iter_records(store, evaluator=name) if r.rejudge_of is None]
    versions = list(dict.fromkeys(r.evaluator_version or UNVERSIONED for r in records))  # newest first
    if version is None and versions:
        version = versions[0]
    elif version is not None and version not in versions:
        raise LookupError(f"the Shadow {name!r} has no records of version {version!r} "
                          f"(it has {', '.join(versions) or 'none'})")
    for record in records:
        if (record.evaluator_version or UNVERSIONED) != version:
            continue  # another candidate, criteria or judge: never pooled
        total = _add(total, record)
        for key in by:
            value = getattr(record, key) if key in SEGMENT_FIELDS else (record.metadata or {}).get(key)
            label = "(none)" if value is None else str(value)
            segments[key][label] = _add(segments[key].get(label, Tally()), record)
    decision, p, needed, note = decide(total, alpha)
    return ShadowReport(
        name=name, version=version, versions=versions, comparisons=total.comparisons, wins=total.wins,
        losses=total.losses, ties=total.ties,
        errors=total.errors, skipped=total.skipped, win_rate=total.win_rate,
        interval=wilson(total.wins, total.wins + total.losses), p_value=p, decision=decision,
        needed=needed, note=note,
        segments={key: {label: t.row() for label, t in sorted(groups.items())} for key, groups in segments.items()})


def shadow_report(store: Store | None, name: str, *, by: Sequence[str] = ("agent_id", "user_id"),
                  version: str | None = None, alpha: float = ALPHA) -> ShadowReport:
    """What the comparisons of the `Shadow` named `name` in `store` say: comparisons, wins, losses and
    ties, the candidate's win rate (ties left out) with its 95% Wilson interval, the exact two-sided
    sign test, the decision (promote, keep, not enough data: with how many more comparisons), and the
    same per segment: ``by`` names record fields (agent_id, user_id, ...) or run metadata keys. One
    `version` of the Shadow (its candidate, criteria and judge) is reported: the newest by default."""
    return runtime.call(functools.partial(ashadow_report, store, name, by=by, version=version, alpha=alpha))
