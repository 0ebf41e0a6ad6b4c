"""Open sessions in Redis, where every worker sees them (`SessionJudge(broker=...)`).

A producer's hook writes each turn to its local session book (one short SQLite transaction, as
without a broker); the judgehooks loop forwards the turns to Redis (`SessionRelay.push`) and only
then forgets them, so Redis being down delays turns and loses none. In Redis, per session:

- ``judgehooks:sessions:due`` (one sorted set for all): the session's member, scored by the later of
  its due time and its lease: a worker takes a session once that score has passed;
- ``judgehooks:session:<member>:state`` (hash): ``due_at`` (the latest turn's run time plus
  ``idle_after``, so a turn delayed in transit never moves it earlier), the lease (``owner``,
  ``lease_until``) and ``claims`` (how often it was taken and not finished);
- ``...:turns`` (sorted set of run ids by run time), ``...:data`` and ``...:sigs`` (each turn's
  entry and, with a job key, its HMAC); ``...:seen`` (run ids already taken in, kept
  `SEEN_TTL` seconds), so a turn forwarded twice (a crash between Redis taking it and the book
  forgetting it) is never graded twice, even after its window was graded;
- ``...:through`` (hash): per chain, the last position a worker graded, signed by the worker (kept
  `SEEN_TTL` seconds after the session's last turn).

A window holding a turn whose entry is past `MAX_ENTRY_BYTES` is never written: every worker would
refuse that turn (`too_large`), so the producer stores the window's `error` record, naming it.

Each step is one Lua script, so two workers never both take a session. An entry carries its
evaluator, session, spec, sampling and position (chain and sequence number, from the producer's
session book) inside the signed text, so what Redis holds otherwise only decides when a session is
graded: `sessionworker` checks everything read back.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.exceptions import RedisError

from ...exceptions import EvaluatorError
from ..sessionbook import Claim
from . import Outage, text, too_large
from .signing import job_key, sign

DUE = "judgehooks:sessions:due"
DEAD_STREAM = "judgehooks:sessions:dead"  # sessions no worker finished grading, with their entries
PREFIX = "judgehooks:session:"
#: how long a session remembers the runs it took in (seconds): a duplicate arriving later is ignored
SEEN_TTL = 7 * 24 * 3600
#: turns taken into one window at most (a Lua call's argument limit; the rest form the next window)
MAX_WINDOW = 5000

# Every script's KEYS start as `keys_of` and its ARGV[1] is the member; an unreadable number counts as 0
_PRELUDE = """
local function field(name) return tonumber(redis.call('HGET', KEYS[2], name) or '') or 0 end
local function reschedule() redis.call('ZADD', KEYS[1], math.max(field('due_at'), field('lease_until')), ARGV[1]) end
local function forget()
    redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
    redis.call('ZREM', KEYS[1], ARGV[1])
end
"""

_APPEND = """
local added = 0
for i = 3, #ARGV, 5 do
    if redis.call('SADD', KEYS[6], ARGV[i]) == 1 then
        redis.call('ZADD', KEYS[3], ARGV[i + 1], ARGV[i])
        redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 3])
        if ARGV[i + 4] ~= '' then redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 4]) end
        if tonumber(ARGV[i + 2]) > field('due_at') then redis.call('HSET', KEYS[2], 'due_at', ARGV[i + 2]) end
        added = added + 1
    end
end
redis.call('EXPIRE', KEYS[6], ARGV[2])
redis.call('EXPIRE', KEYS[7], ARGV[2])
if added > 0 then reschedule() end
return added
"""

_CLAIM = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return {0} end
local ids = redis.call('ZRANGE', KEYS[3], 0, tonumber(ARGV[5]) - 1)
if #ids == 0 then
    forget()
    return {0}
end
local claims = field('claims') + 1
redis.call('HSET', KEYS[2], 'claims', claims, 'owner', ARGV[4], 'lease_until', ARGV[3])
reschedule()
return {1, claims, ids, redis.call('HMGET', KEYS[4], unpack(ids)), redis.call('HMGET', KEYS[5], unpack(ids))}
"""

# ARGV: member, owner token, lease_until, "1" to give the session back (the worker did not die: its
# claim does not count toward dead-lettering) or "0" to renew the lease
_LEASE = """
if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[2], 'lease_until', ARGV[3])
if ARGV[4] == '1' then
    redis.call('HDEL', KEYS[2], 'owner')
    redis.call('HSET', KEYS[2], 'claims', math.max(field('claims') - 1, 0))
end
reschedule()
return 1
"""

_FINISH = """
for i = 3, #ARGV do
    redis.call('ZREM', KEYS[3], ARGV[i])
    redis.call('HDEL', KEYS[4], ARGV[i])
    redis.call('HDEL', KEYS[5], ARGV[i])
end
if redis.call('ZCARD', KEYS[3]) == 0 then
    forget()
    return 0
end
if redis.call('HGET', KEYS[2], 'owner') == ARGV[2] then
    redis.call('HDEL', KEYS[2], 'owner', 'lease_until')
    redis.call('HSET', KEYS[2], 'claims', 0)
    reschedule()
end
return redis.call('ZCARD', KEYS[3])
"""

_END = """
if redis.call('ZCARD', KEYS[3]) == 0 then return 0 end
redis.call('HSET', KEYS[2], 'due_at', ARGV[2])
reschedule()
return 1
"""


def member_of(evaluator: str, session_id: str) -> str:
    """A session's member in the due set (and the middle of its keys): 40 hex digits, whatever the ids hold."""
    return hashlib.sha256(json.dumps([evaluator, session_id]).encode()).hexdigest()[:40]


def is_member(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)


def keys_of(member: str) -> list[str]:
    """The due set, then the session's state, turns, data, sigs and seen keys."""
    base = PREFIX + member
    return [DUE, f"{base}:state", f"{base}:turns", f"{base}:data", f"{base}:sigs", f"{base}:seen"]


def through_key(member: str) -> str:
    """The session's graded-through marks: chain -> "<sequence number>:<signature>"."""
    return f"{PREFIX}{member}:through"


def signed_text(member: str, chain: str, seq: int, entry: str) -> bytes:
    """What a turn's signature covers: its session's member, its position in the session (chain and
    sequence number) and its whole entry, so a signed turn cannot be moved into another session
    or to another place in its own."""
    return f"{member}\x1f{chain}\x1f{seq}\x1f{entry}".encode()


def through_text(member: str, chain: str, seq: int) -> bytes:
    """What a graded-through mark's signature covers."""
    return f"{member}\x1fthrough\x1f{chain}\x1f{seq}".encode()


@dataclass(frozen=True, slots=True)
class Window:
    """A session taken by a worker: its turns' run ids in order, their raw entries and signatures."""

    member: str
    token: str
    claims: int
    run_ids: tuple[str, ...]
    entries: tuple[bytes | None, ...]
    sigs: tuple[bytes | None, ...]


class RedisSessions:
    """The scripts over one connection pool, for producers (push, end) and workers (claim, lease, finish)."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.redis = Redis(connection_pool=pool)
        self._append, self._claim, self._lease, self._finish, self._end = (
            self.redis.register_script(_PRELUDE + body) for body in (_APPEND, _CLAIM, _LEASE, _FINISH, _END))

    async def push(self, member: str, turns: Sequence[tuple[str, float, float, str, bytes | None]]) -> int:
        """Take in turns as (run_id, at, due_at, entry, sig): how many were new."""
        args: list[Any] = [member, SEEN_TTL]
        for run_id, at, due_at, entry, sig in turns:
            args += [run_id, repr(at), repr(due_at), entry, sig or b""]
        return int(await self._append(keys=[*keys_of(member), through_key(member)], args=args))

    async def end(self, member: str, now: float) -> bool:
        return bool(await self._end(keys=keys_of(member), args=[member, repr(now)]))

    async def due(self, now: float, limit: int) -> list[str]:
        """Members whose due time (or lapsed lease) has passed, earliest first, as text (undecodable ones too)."""
        return [text(m) for m in await self.redis.zrangebyscore(DUE, "-inf", repr(now), start=0, num=limit)]

    async def claim(self, member: str, token: str, *, now: float, lease: float) -> Window | None:
        reply = await self._claim(keys=keys_of(member), args=[member, repr(now), repr(now + lease), token, MAX_WINDOW])
        if not reply or int(reply[0]) != 1:
            return None
        _, claims, ids, entries, sigs = reply
        return Window(member, token, int(claims), tuple(text(i) for i in ids), tuple(entries), tuple(sigs))

    async def hold(self, window: Window, until: float, *, back: bool = False) -> bool:
        """Hold the window until `until`, or give it `back` ungraded (the store was down, or this worker
        is stopping), due again then: False when another worker has taken it over."""
        args = [window.member, window.token, repr(until), "1" if back else "0"]
        return bool(await self._lease(keys=keys_of(window.member), args=args))

    async def through(self, member: str) -> dict[str, bytes]:
        """The session's graded-through marks as Redis holds them (chain -> raw value)."""
        found = await self.redis.hgetall(through_key(member))
        return {text(k): v if isinstance(v, bytes) else str(v).encode() for k, v in found.items()}

    async def mark_through(self, member: str, marks: dict[str, bytes]) -> None:
        """Set graded-through marks (the window's record is stored), kept `SEEN_TTL` seconds."""
        if marks:
            mapping: dict[Any, Any] = dict(marks)
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(through_key(member), mapping=mapping)
                pipe.expire(through_key(member), SEEN_TTL)
                await pipe.execute()

    async def finish(self, window: Window) -> int:
        """Forget the window's turns (their record is stored, or they were refused): how many turns are left."""
        return int(await self._finish(keys=keys_of(window.member), args=[window.member, window.token, *window.run_ids]))


class SessionRelay:
    """The producer's side: forwards a session book's claims to Redis, signed when a job key is set."""

    def __init__(self, broker_url: str, *, idle_after: float, key: str | bytes | None = None) -> None:
        self.broker_url = broker_url
        self.idle_after = idle_after
        self.key = job_key(key)  # given, else $JUDGEHOOKS_JOB_KEY: turns are signed as jobs are
        self._sessions: RedisSessions | None = None
        self._loop: Any = None
        self.outage = Outage(broker_url, "session turns wait in the outbox file; forwarding is retried")

    def _connected(self) -> RedisSessions:
        loop = asyncio.get_running_loop()
        if self._sessions is None or self._loop is not loop:  # connections belong to one loop
            # Blocking: more forwards at once than connections wait for one (up to 20 s), where a plain
            # pool raised "Too many connections" and a busy producer took Redis for down.
            pool = BlockingConnectionPool.from_url(self.broker_url, max_connections=8, timeout=20,
                                                   socket_connect_timeout=5)
            self._sessions, self._loop = RedisSessions(pool), loop
        return self._sessions

    def entries(self, claim: Claim) -> tuple[str, list[tuple[str, float, float, str, bytes | None]]]:
        """The claim's turns as Redis entries: each carries its evaluator, session, spec, sampling and
        position (a turn from a book file older than positions starts a chain of its own)."""
        member = member_of(claim.evaluator, claim.session_id)
        out = []
        positions = claim.positions or (None,) * len(claim.turns)
        for turn, position in zip(claim.turns, positions, strict=True):
            at = turn.get("at")
            at = float(at) if isinstance(at, (int, float)) else time.time()
            chain, seq = position if position is not None else (os.urandom(8).hex(), 1)
            run_id = str((turn.get("run") or {}).get("run_id") or "")
            entry = json.dumps({"evaluator": claim.evaluator, "session_id": claim.session_id, "run_id": run_id,
                                "at": at, "chain": chain, "seq": seq, "sample_rate": claim.sample_rate,
                                "spec": claim.spec, "turn": turn}, ensure_ascii=False, default=str)
            sig = None if self.key is None else sign(self.key, signed_text(member, chain, seq, entry))
            out.append((run_id, at, at + self.idle_after, entry, sig))
        return member, out

    async def push(self, claim: Claim) -> bool:
        """Hand a claim's turns to Redis: False (logged once per outage) when Redis cannot take them now.
        A turn past `MAX_ENTRY_BYTES`, which every worker would refuse, is an `EvaluatorError` naming it:
        nothing of the window is written, and the producer stores the window's error record."""
        member, turns = self.entries(claim)
        for run_id, _, _, entry, _ in turns:
            if why := too_large(len(entry.encode())):
                raise EvaluatorError(f"session turn {run_id!r} is {why}, so the window was not forwarded to "
                                     "Redis: every worker would refuse it. Shorten the run's text before it is "
                                     "graded (redact=), or grade this evaluator in this process (without broker=)")
        try:
            await self._connected().push(member, turns)
        except (RedisError, OSError) as exc:
            self.outage.down(exc)
            return False
        self.outage.up()
        return True

    async def end(self, evaluator: str, session_id: str) -> bool:
        """Make a session due now in Redis (`end_session`): a worker grades it."""
        try:
            return await self._connected().end(member_of(evaluator, session_id), time.time())
        except (RedisError, OSError) as exc:
            self.outage.down(exc)
            return False
