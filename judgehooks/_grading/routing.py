"""Doubt routed to people: which live verdicts go to the review queue, and why.

A verdict is routed (its record's ``review_reason`` set) when the evaluator is unsure of it:

- its jurors disagree: an `Ensemble`'s samples, or a `Borderline`'s re-asks, split between pass and
  fail (the ``votes`` a composite records in its details);
- a numeric score lies within ``review_margin`` of the threshold;
- a random audit picks it (``review_sample_rate``), decided by the record's id, so the same run is
  picked in every process that grades it, and again on a replay.

Only the live pipeline routes (`HookSettings.build`): the hook, the background queue, `resume` and
Redis workers grading what live runs filed. Offline grades, `optimize` trials, `Shadow` comparisons,
judge health checks and `consistency` re-judgements make their records without a `Review`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: the audit sample reads this many leading hex digits of the record id (a uniform 32-bit number)
_DIGITS = 8
_SPAN = float(16 ** _DIGITS)


@dataclass(frozen=True, slots=True)
class Review:
    """When a live verdict goes to people: `margin` (None: no score is near enough), `sample_rate`
    (0 to 1, the audit's share), and juror disagreement (always)."""

    margin: float | None = None
    sample_rate: float = 0.0

    def reason(self, record_id: str, passed: bool | None, score: float | None, threshold: float | None,
               details: Mapping[str, Any]) -> str | None:
        """Why this verdict is routed to review, or None. Every reason that holds, joined by "; "."""
        if passed is None:  # an error or a skipped run has no verdict to review
            return None
        reasons = []
        votes = details.get("votes")
        if isinstance(votes, Mapping):
            up, down = votes.get("passed"), votes.get("failed")
            if isinstance(up, int) and isinstance(down, int) and up > 0 and down > 0:
                reasons.append(f"jurors disagree: {up} passed, {down} failed")
        margin = self.margin
        if (margin is not None and score is not None and threshold is not None
                and abs(score - threshold) <= margin):
            reasons.append(f"score {score:g} within {margin:g} of the threshold {threshold:g}")
        if self.sample_rate > 0 and audit_draw(record_id) < self.sample_rate:
            reasons.append(f"audit sample ({self.sample_rate:.0%})" if self.sample_rate >= 0.01
                           else f"audit sample ({self.sample_rate:g})")
        return "; ".join(reasons) or None


def audit_draw(record_id: str) -> float:
    """A number in [0, 1) read from the record id: ids are hashes (uuid5), so the draw is uniform, and
    the same record draws the same number everywhere."""
    digits = record_id.replace("-", "")[:_DIGITS]
    try:
        number = int(digits, 16)
    except ValueError:  # an id that is not hex (a store's own): hash it
        number = int(hashlib.sha1(record_id.encode(), usedforsecurity=False).hexdigest()[:_DIGITS], 16)
    return float(number) / _SPAN
