"""Spend caps across every `judgehooks worker`, counted in Redis.

One Lua script, atomic on the server and timed by the server's clock, reads the window's counts and
admits (counting the call) unless a cap is reached; costs are added with INCRBYFLOAT once known.
Keys expire two windows after they start. A value that is not a count (a forged key: text, a negative
number, another type) counts as zero, and counting goes on from there. Redis
unreachable: the call is admitted, with a warning (the judge is not held up by the counter).
"""

from __future__ import annotations

from redis.asyncio import ConnectionPool, Redis
from redis.exceptions import RedisError

from ..._base.log import log
from ..spend import Ticket

KEY_PREFIX = "judgehooks:spend:"

# KEYS[1]: the budget's key; ARGV: period (s), max calls, max cost (-1: none).
# Returns {admitted, window start, calls, cost as text}.
_RESERVE = """
local t = redis.call('TIME')
local period = tonumber(ARGV[1])
local window = math.floor(tonumber(t[1]) / period) * period
local calls_key = KEYS[1] .. ':' .. window .. ':calls'
local cost_key = KEYS[1] .. ':' .. window .. ':cost'
local function count(key)  -- not a count (text, negative, NaN, another type): zero, and counted on from there
    local n = tonumber(redis.pcall('GET', key))
    if n == nil or n ~= n or n < 0 then
        redis.call('DEL', key)
        return 0
    end
    return n
end
local calls, cost = count(calls_key), count(cost_key)
local max_calls, max_cost = tonumber(ARGV[2]), tonumber(ARGV[3])
if (max_calls >= 0 and calls >= max_calls) or (max_cost >= 0 and cost >= max_cost) then
    return {0, window, calls, tostring(cost)}
end
redis.call('SET', calls_key, calls + 1, 'EX', period * 2)
return {1, window, calls + 1, tostring(cost)}
"""


class RedisLedger:
    """A `Ledger` in Redis: every process that uses the same server shares the counts."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._redis = Redis(connection_pool=pool)
        self._script = self._redis.register_script(_RESERVE)

    async def reserve(self, key: str, period: int, max_calls: int | None, max_cost_usd: float | None) -> Ticket:
        try:
            admitted, window, calls, cost = await self._script(
                keys=[KEY_PREFIX + key], args=[period, -1 if max_calls is None else max_calls,
                                               -1 if max_cost_usd is None else max_cost_usd])
            return Ticket(int(window), int(calls), float(cost), admitted=bool(admitted))
        except (RedisError, OSError, ValueError, TypeError) as exc:
            log.warning("spend_cap_unavailable", key=key, error_type=type(exc).__name__, error=str(exc),
                        note="the call is admitted uncounted")
            return Ticket(0)

    async def add_cost(self, key: str, window: int, period: int, cost_usd: float) -> None:
        if not window:  # admitted while Redis was unreachable: nothing to add to
            return
        cost_key = f"{KEY_PREFIX}{key}:{window}:cost"
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.incrbyfloat(cost_key, cost_usd)
                pipe.expire(cost_key, period * 2)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            log.warning("spend_cap_unavailable", key=key, error_type=type(exc).__name__, error=str(exc),
                        note="this call's cost is not counted")

