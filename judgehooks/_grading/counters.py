"""What `judgehooks.stats()` reports for one background dispatcher."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .._base.record import EvalRecord


@dataclass
class Counters:
    """A dispatcher's counts since it started (the dispatcher holds its lock around every change)."""

    submitted: int = 0
    done: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    dropped: int = 0
    retries: int = 0
    resumed: int = 0
    duplicates: int = 0  # jobs claimed from the outbox whose records were stored already: not graded again
    store_failures: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)

    def finished(self, record: EvalRecord | None) -> None:
        """A job's step is done: graded into `record`, or handed on (None)."""
        self.done += 1
        if record is None:
            return
        self.retries += max(0, record.attempts - 1)
        if record.status == "passed":
            self.passed += 1
        elif record.status == "failed":
            self.failed += 1
        elif record.status == "error":
            self.errors += 1

    def shed(self, reason: str) -> None:
        """A job was dropped under load (its record is `skipped`)."""
        self.dropped += 1
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # by_reason copied too
