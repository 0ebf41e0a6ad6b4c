"""A grading's clock: the record's `latency_ms` is the time spent grading, without a judge's
one-time setup (the first call imports litellm, seconds, in `BaseJudge.prepare`).

The grading that times a record sets `current_stopwatch`; the ONE loop every LLM-judge call goes
through (`JudgeCall.ask`) pauses it around `prepare`. Pauses may overlap (composite members
preparing at once): the clock stops while any is open, so a stretch is left out once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: the clock read (a module attribute, so a test can give it a clock of its own)
clock = time.perf_counter


class Stopwatch:
    """Started when made; `elapsed_ms()` leaves out every `paused()` stretch."""

    __slots__ = ("_left_out", "_open", "_paused_at", "_started")

    def __init__(self) -> None:
        self._started = clock()
        self._left_out = 0.0
        self._open = 0
        self._paused_at = 0.0

    @contextmanager
    def paused(self) -> Iterator[None]:
        if self._open == 0:
            self._paused_at = clock()
        self._open += 1
        try:
            yield
        finally:
            self._open -= 1
            if self._open == 0:
                self._left_out += clock() - self._paused_at

    def elapsed_ms(self) -> float:
        now = clock()
        paused = self._left_out + (now - self._paused_at if self._open else 0.0)
        return max(0.0, now - self._started - paused) * 1000


#: the stopwatch of the grading running in this task (None: nothing is timed)
current_stopwatch: ContextVar[Stopwatch | None] = ContextVar("judgehooks_stopwatch", default=None)
