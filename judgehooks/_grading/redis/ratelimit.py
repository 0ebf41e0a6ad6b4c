"""`requests_per_minute` across every `judgehooks worker`, kept in Redis.

A worker process pacing itself alone lets N workers send N times the limit. Here each judge model
has one state in Redis: the time of its last admitted call. A Lua script, atomic on the server and
timed by the server's clock, admits a call once the caller's own interval (60/rpm of its
evaluator) has passed since then, as the in-process `RateLimiter` does; otherwise it says how long
to wait. A waiting call reserves nothing, so a worker that stalls or dies holds no slot, and calls
are spaced evenly whichever worker makes them.
"""

from __future__ import annotations

import asyncio
import random

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..._base.log import log

KEY_PREFIX = "judgehooks:ratelimit:"

# KEYS[1]: the model's key; ARGV[1]: this caller's microseconds between calls. Returns 0 (go) or
# microseconds to wait. The key keeps the last call's time (server clock) for an hour, or longer
# than the caller's interval.
_PACE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.pcall('GET', KEYS[1])) or 0  -- text or a key of another type: no call yet
local interval = tonumber(ARGV[1])
if last > now then
    last = 0  -- a call in the future was never admitted by a limiter: not honoured
end
if last > 0 and last + interval > now then
    return math.ceil(last + interval - now)
end
redis.call('SET', KEYS[1], string.format('%.0f', now), 'PX', math.max(3600000, math.ceil(interval / 1000) + 1000))
return 0
"""


class SharedRateLimiter:
    """At most `requests_per_minute` acquisitions per minute under `key`, across every process that
    shares the Redis server, evenly spaced (no burst), like the in-process `RateLimiter`."""

    def __init__(self, redis: Redis, key: str, requests_per_minute: float = 60.0) -> None:
        if requests_per_minute <= 0:
            raise ValueError(f"requests_per_minute must be > 0, got {requests_per_minute!r}")
        self.key = key
        self.interval_us = max(1, round(60_000_000 / requests_per_minute))
        self._script = redis.register_script(_PACE)

    async def acquire(self, interval: float | None = None) -> None:
        """Wait until this call may go: `interval` seconds (default: this limiter's rate) after the
        model's last call. Redis unreachable: wait and ask again (the job stays unacked)."""
        interval_us = self.interval_us if interval is None else max(1, round(interval * 1_000_000))
        backoff = 0.1
        while True:
            try:
                wait_us = int(await self._script(keys=[self.key], args=[interval_us]))
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                log.warning("rate_limit_unavailable", key=self.key, error_type=type(exc).__name__, error=str(exc),
                            retry_in_s=backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if wait_us <= 0:
                return
            # Callers woken together would ask together; a little jitter spreads them.
            await asyncio.sleep(wait_us / 1e6 + random.random() * min(0.01, interval_us / 1e7))

