"""`capture_records()`: every record judgehooks delivers, in a list, as `structlog.testing.capture_logs`
captures log events."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from .._base.observers import observers
from .._base.record import EvalRecord


@contextmanager
def capture_records() -> Iterator[list[EvalRecord]]:
    """Collect every `EvalRecord` delivered in this process while the block runs, whatever store
    is configured (inline, background and offline grading alike), in delivery order.

    Background records are delivered later: call ``judgehooks.drain()`` inside the block.
    """
    captured: list[EvalRecord] = []

    def observe(records: Sequence[EvalRecord]) -> None:
        captured.extend(records)

    observers.add(observe)
    try:
        yield captured
    finally:
        observers.remove(observe)
