"""`requests_per_minute`: judge calls paced per judge model, on every path (`Pipeline.grade`'s meter).

One limiter per judge model in the process (`RateLimiter.for_model`) remembers when that model was
last called. Each call waits until ITS evaluator's interval (60/rpm) has passed since the model's
last call: an evaluator never goes faster than its own rate, counting everyone's calls to the
model, and no evaluator's setting changes another's rate (as it did when the last evaluator
constructed set the rate for all). Redis workers swap in the fleet's limiter (`redis/ratelimit.py`),
which keeps the same state in Redis.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import anyio


class Limiter(Protocol):
    """Where a judge model's last call is remembered: this process, or Redis for a fleet."""

    async def acquire(self, interval: float | None = None) -> None: ...


class RateLimiter:
    """Spaces a model's calls: each waits until `interval` seconds after the model's last call
    (a leaky bucket with no burst)."""

    _by_model: dict[str, RateLimiter] = {}
    _lock = threading.Lock()

    def __init__(self, requests_per_minute: float | None = None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> None:
        """`requests_per_minute`: the default rate of `acquire()`; `clock` and `sleep` are the wall
        clock unless a test brings its own."""
        if requests_per_minute is not None and not requests_per_minute > 0:
            raise ValueError(f"requests_per_minute must be > 0, got {requests_per_minute!r}")
        self.interval = 0.0 if requests_per_minute is None else 60.0 / requests_per_minute
        self._last = -math.inf  # the last call's slot
        self._clock, self._sleep = clock, sleep

    @classmethod
    def for_model(cls, model: str) -> RateLimiter:
        """The process's one limiter for judge model `model`."""
        with cls._lock:
            limiter = cls._by_model.get(model)
            if limiter is None:
                limiter = cls._by_model[model] = cls()
            return limiter

    async def acquire(self, interval: float | None = None) -> None:
        """Wait for this call's slot: `interval` seconds (default: this limiter's) after the last one."""
        interval = self.interval if interval is None else interval
        now = self._clock()
        slot = max(now, self._last + interval)
        self._last = slot
        if slot > now:
            await self._sleep(slot - now)


@dataclass(frozen=True, slots=True)
class Pace:
    """An evaluator's `requests_per_minute` against its judge model's limiter."""

    requests_per_minute: float
    model: str  # the judge model (or the evaluator's name when it calls no judge of its own)
    limiter: Limiter

    @classmethod
    def local(cls, model: str, requests_per_minute: float | None) -> Pace | None:
        if requests_per_minute is None:
            return None
        return cls(requests_per_minute, model, RateLimiter.for_model(model))

    async def wait(self) -> None:
        await self.limiter.acquire(60.0 / self.requests_per_minute)
