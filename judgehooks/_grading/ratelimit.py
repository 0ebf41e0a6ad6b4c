"""Requests-per-minute limits, one per judge model, shared by every dispatcher in the process."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable

import anyio


class RateLimiter:
    """Spaces acquisitions at least 60/rpm seconds apart (a leaky bucket with no burst)."""

    _by_model: dict[str, RateLimiter] = {}
    _lock = threading.Lock()

    def __init__(self, requests_per_minute: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> None:
        """`clock` and `sleep` are the wall clock unless a test brings its own."""
        if requests_per_minute <= 0:
            raise ValueError(f"requests_per_minute must be > 0, got {requests_per_minute!r}")
        self.interval = 60.0 / requests_per_minute
        self._next = 0.0
        self._clock, self._sleep = clock, sleep

    @classmethod
    def for_model(cls, model: str, requests_per_minute: float | None) -> RateLimiter | None:
        if requests_per_minute is None:
            return None
        with cls._lock:
            limiter = cls._by_model.get(model)
            if limiter is None or limiter.interval != 60.0 / requests_per_minute:
                limiter = cls._by_model[model] = cls(requests_per_minute)
            return limiter

    async def acquire(self) -> None:
        now = self._clock()
        slot = max(now, self._next)
        self._next = slot + self.interval
        if slot > now:
            await self._sleep(slot - now)
