"""Label: one person's verdict on one stored record, kept beside the judge's to measure the judge.

One label per (record, reviewer): labelling again replaces that reviewer's label. A label says
``passed``, or gives a ``score`` (held to the record's threshold when it has no ``passed``), or both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .record import utcnow

#: longest note and reviewer name kept, in characters: labels may come from files anyone wrote
MAX_NOTE_CHARS = 4096
MAX_REVIEWER_CHARS = 200


@dataclass(frozen=True, slots=True)
class Label:
    """A human verdict on the record ``record_id``, by ``reviewer``."""

    record_id: str
    reviewer: str
    passed: bool | None = None
    score: float | None = None
    note: str | None = None
    created_at: datetime = field(default_factory=utcnow)

    def __post_init__(self) -> None:
        if not isinstance(self.record_id, str) or not self.record_id.strip() or len(self.record_id) > 200:
            raise ValueError(f"a label needs the record id it is about (a string), got {self.record_id!r:.80}")
        if not isinstance(self.reviewer, str) or not self.reviewer.strip() or len(self.reviewer) > MAX_REVIEWER_CHARS:
            raise ValueError(f"a label needs who gave it (by=, a name of 1-{MAX_REVIEWER_CHARS} characters), "
                             f"got {self.reviewer!r:.80}")
        if self.passed is not None and not isinstance(self.passed, bool):
            raise ValueError(f"passed must be True, False or None, got {self.passed!r:.80}")
        score = self.score
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                                  or not math.isfinite(score)):
            raise ValueError(f"score must be a finite number or None, got {score!r:.80}")
        if self.passed is None and score is None:
            raise ValueError("a label needs passed=True/False or a score")
        if self.note is not None and not isinstance(self.note, str):
            raise ValueError(f"note must be text or None, got {type(self.note).__name__}")
        if self.note is not None and len(self.note) > MAX_NOTE_CHARS:
            object.__setattr__(self, "note", self.note[:MAX_NOTE_CHARS])
        if not isinstance(self.created_at, datetime) or self.created_at.tzinfo is None:
            raise ValueError(f"created_at must be a timezone-aware datetime, got {self.created_at!r:.80}")

    def data(self) -> dict[str, Any]:
        """The label as JSON data."""
        return {"record_id": self.record_id, "reviewer": self.reviewer, "passed": self.passed, "score": self.score,
                "note": self.note, "created_at": self.created_at.astimezone(UTC).isoformat(timespec="microseconds")}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Label:
        """A label from `data` (as `data()` writes it); ValueError naming what is wrong."""
        created = data.get("created_at")
        when = datetime.fromisoformat(created) if isinstance(created, str) else created
        return cls(record_id=data.get("record_id"), reviewer=data.get("reviewer"),  # type: ignore[arg-type]
                   passed=data.get("passed"), score=data.get("score"), note=data.get("note"),
                   **({"created_at": when} if when is not None else {}))
