"""Which runs get graded: a `when=` filter and a `sample_rate`, decided on the hook path."""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._base.context import EvalContext

SampleRate = float | Callable[[EvalContext], float]


def _unit(run_id: str | None) -> float:
    """A run's fixed point in [0, 1): the same run is sampled the same way by every process."""
    if run_id is None:
        return random.random()
    return int.from_bytes(hashlib.blake2b(run_id.encode(), digest_size=8).digest(), "big") / 2**64


@dataclass
class SamplingCounts:
    sampled_out: int = 0
    filtered_out: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)


@dataclass(frozen=True)
class Sampler:
    """Decides per run; returns the probability a chosen run was sampled with, or None."""

    sample_rate: SampleRate = 1.0
    when: Callable[[EvalContext], bool] | None = None
    counts: SamplingCounts = field(default_factory=SamplingCounts)

    @staticmethod
    def validate(sample_rate: Any, when: Any) -> None:
        if callable(sample_rate):
            pass
        elif isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, float)) or not 0 <= sample_rate <= 1:
            raise ValueError(f"sample_rate must be a number from 0 to 1 or a callable of the run context, "
                             f"got {sample_rate!r}")
        if when is not None and not callable(when):
            raise TypeError(f"when must be a callable taking the EvalContext and returning a bool, "
                            f"got {type(when).__name__}")

    @property
    def always(self) -> bool:
        return self.when is None and not callable(self.sample_rate) and self.sample_rate >= 1

    def decide(self, ctx: EvalContext) -> float | None:
        if self.when is not None and not self.when(ctx):
            self.counts.add("filtered_out")
            return None
        rate = self.sample_rate(ctx) if callable(self.sample_rate) else self.sample_rate
        rate = min(1.0, max(0.0, float(rate)))
        if rate >= 1.0 or (rate > 0.0 and _unit(ctx.run_id) < rate):
            return rate
        self.counts.add("sampled_out")
        return None
