"""`requests_per_minute` across every `judgehooks worker`, kept in Redis.

A worker process pacing itself alone lets N workers send N times the limit. Here each judge model
has one GCRA state (its next allowed time) in Redis. A Lua script, atomic on the server and timed
by the server's clock, admits a call when that time has come and moves it on by 60/rpm seconds;
otherwise it says how long to wait. A waiting call reserves nothing, so a worker that stalls or
dies holds no slot, and calls are spaced evenly whichever worker makes them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

from redis.asyncio import ConnectionPool, Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..._base.log import log
from ..pipeline import Pipeline

KEY_PREFIX = "judgehooks:ratelimit:"

# KEYS[1]: the model's key; ARGV[1]: microseconds between calls. Returns 0 (go) or microseconds to wait.
_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local next_allowed = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local interval = tonumber(ARGV[1])
if next_allowed > now + interval then
    next_allowed = 0  -- never set by a limiter (one call's wait is at most an interval): not honoured
end
if next_allowed > now then
    return math.ceil(next_allowed - now)
end
redis.call('SET', KEYS[1], string.format('%.0f', now + interval), 'PX', math.ceil(interval / 1000) + 1000)
return 0
"""


class SharedRateLimiter:
    """At most `requests_per_minute` acquisitions per minute under `key`, across every process that
    shares the Redis server, evenly spaced (no burst), like the in-process `RateLimiter`."""

    def __init__(self, redis: Redis, key: str, requests_per_minute: float) -> None:
        if requests_per_minute <= 0:
            raise ValueError(f"requests_per_minute must be > 0, got {requests_per_minute!r}")
        self.key = key
        self.interval_us = max(1, round(60_000_000 / requests_per_minute))
        self._script = redis.register_script(_GCRA)

    async def acquire(self) -> None:
        """Wait until this call may go. Redis unreachable: wait and ask again (the job stays unacked)."""
        backoff = 0.1
        while True:
            try:
                wait_us = int(await self._script(keys=[self.key], args=[self.interval_us]))
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                log.warning("rate_limit_unavailable", key=self.key, error_type=type(exc).__name__, error=str(exc),
                            retry_in_s=backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if wait_us <= 0:
                return
            # Callers woken together would ask together; a little jitter spreads them.
            await asyncio.sleep(wait_us / 1e6 + random.random() * min(0.01, self.interval_us / 1e7))


class FleetRateLimits:
    """For each job's pipeline, the shared limit of its judge model: the `requests_per_minute` of the
    evaluator the worker imported, else the worker's `default` (None: no limit)."""

    def __init__(self, pool: ConnectionPool, rates: Mapping[str, float | None], default: float | None = None) -> None:
        self._redis = Redis(connection_pool=pool)
        self._rates, self._default = dict(rates), default
        self._limiters: dict[tuple[str, float], SharedRateLimiter] = {}

    @classmethod
    def of(cls, pool: ConnectionPool, evaluators: Mapping[str, Any], default: float | None = None) -> FleetRateLimits:
        """The limits of imported judgehooks evaluators (each knows its `hook_settings`)."""
        return cls(pool, {name: ev.hook_settings.requests_per_minute for name, ev in evaluators.items()}, default)

    async def acquire(self, pipeline: Pipeline) -> None:
        rate = self._rates.get(pipeline.name) or self._default
        if rate is None:
            return
        judge = pipeline.judge
        model = judge.model if judge is not None else pipeline.name  # as the in-process limiter keys
        limiter = self._limiters.get((model, rate))
        if limiter is None:
            limiter = self._limiters[(model, rate)] = SharedRateLimiter(self._redis, KEY_PREFIX + model, rate)
        await limiter.acquire()
