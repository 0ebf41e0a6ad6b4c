"""The Redis Streams broker (taskiq-redis) with what taskiq-redis leaves out, measured here:

- An idle `RedisStreamBroker` reclaims a dead consumer's messages only after new traffic arrives
  (its XAUTOCLAIM runs after an XREADGROUP that returned something). Ours reclaims on a timer.
- Its consumer group starts at "$", so jobs published before the first worker starts are never
  delivered. Ours starts at "0", created by producers and workers alike.
- A live worker's slow job would be reclaimed once it is idle for `reclaim_after`; ours touches
  the messages it holds (XCLAIM JUSTID) so only a dead worker's messages go idle.
- Acked messages stay in the stream forever; ours deletes them on ack (XACK + XDEL).
- A job that kills every worker that takes it would be reclaimed forever; ours reads each
  reclaimed entry's delivery count (XPENDING) and, past `max_deliveries`, moves it to the dead-letter
  stream `judgehooks:grading:dead` once `on_dead` stored its run's record (XADD, then XACK + XDEL),
  and counts it; a signed worker refuses an unsigned entry instead, whatever its count.
- It trusts whatever is in the stream. Ours signs what it publishes when a job key is set
  (`signing`), and a worker with a key refuses unsigned or mis-signed entries; refused entries and
  entries that are not judgehooks jobs are moved, with the reason, to the `judgehooks:refused`
  stream (acked, counted and logged), so nothing is dropped unseen.
- It reads an entry of any size. Ours refuses one past `MAX_ENTRY_BYTES` (`too_large`) before its
  signature is checked or a byte of it decoded.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, cast

from redis.asyncio import Redis, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import StreamIdT
from taskiq import AckableMessage, BrokerMessage, TaskiqMessage
from taskiq_redis import RedisStreamBroker

from ..._base.log import log
from ...exceptions import StoreError
from . import check_url, text, too_large
from .detached import detached
from .signing import refusal, sign

TASK_NAME = "judgehooks.grade"
STREAM = "judgehooks:grading"
GROUP = "judgehooks-workers"
DEAD_STREAM = f"{STREAM}:dead"
#: how often a job may be delivered (and its worker die or stop) before it becomes a dead letter
MAX_DELIVERIES = 5
#: told of each dead letter: the entry's taskiq message and how often it was delivered
OnDead = Callable[[bytes, int], Awaitable[None]]
#: no reply is awaited longer than this (seconds); XREADGROUP blocks at most 1 s
SOCKET_TIMEOUT = 30.0
REFUSED_STREAM = "judgehooks:refused"  # entries a worker would not grade, with why (the newest 10,000)
REFUSED_MAXLEN = 10_000
#: XREADGROUP's reply in redis-py's legacy shape: per stream, its (entry id, fields) pairs
StreamReply = list[tuple[Any, list[tuple[Any, Any]]]]


class StreamMessage(AckableMessage):
    """A delivery that remembers its stream entry, so the worker can stop touching it."""

    entry_id: str


class JudgeStreamBroker(RedisStreamBroker):
    """taskiq-redis's stream broker, with timed reclaim, keep-alive of held messages and XDEL on ack."""

    def __init__(self, url: str, *, consumer_name: str | None = None, reclaim_after: float = 30.0,
                 fetch_count: int = 32, max_connections: int = 50, max_deliveries: int = MAX_DELIVERIES,
                 on_dead: OnDead | None = None, job_key: bytes | None = None) -> None:
        super().__init__(check_url(url), queue_name=STREAM, consumer_group_name=GROUP, consumer_name=consumer_name,
                         consumer_id="0", xread_block=int(min(1.0, reclaim_after / 4) * 1000),
                         idle_timeout=int(reclaim_after * 1000), xread_count=fetch_count,
                         max_connection_pool_size=max_connections, socket_connect_timeout=5,
                         socket_timeout=SOCKET_TIMEOUT)
        self.reclaim_after = reclaim_after
        self.held: set[str] = set()  # entries delivered to this consumer and not yet finished
        self.reclaimed = 0
        self.max_deliveries = max_deliveries
        self.on_dead = on_dead
        self.dead_lettered = 0
        self.job_key = job_key  # signs what this broker publishes; a worker's refuses what is not signed with it
        self.refused: Counter[str] = Counter()  # by reason

    async def _declare_consumer_group(self) -> None:
        """The stream and its group, made if missing. Unlike taskiq-redis's own (which logs and drops
        every `ResponseError`), only "the group exists" is taken as done: a key of another type or a
        refused command raises, so a worker never reads on as if the group were there."""
        async with Redis(connection_pool=self.connection_pool) as conn:
            try:
                await conn.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def job(self, payload: str) -> BrokerMessage:
        """A job's taskiq message, as `kiq(job=payload)` makes it: the one shape `_why_refused` admits."""
        return self.formatter.dumps(TaskiqMessage(task_id=self.id_generator(), task_name=TASK_NAME, labels={},
                                                  labels_types={}, args=[], kwargs={"job": payload}))

    async def kick(self, message: BrokerMessage) -> None:
        """Publish one job, signed when this broker has a job key."""
        fields = {b"data": message.message}
        if self.job_key is not None:
            fields[b"sig"] = sign(self.job_key, message.message)
        async with Redis(connection_pool=self.connection_pool) as conn:
            await conn.xadd(STREAM, cast(Any, fields), maxlen=self.maxlen, approximate=self.approximate)

    def _why_refused(self, fields: Any) -> str | None:
        """Why this consumer must not grade a stream entry, or None."""
        data = fields.get(b"data") if isinstance(fields, dict) else None
        if not isinstance(data, bytes):
            return "not_a_job"
        if too_large(len(data)) is not None:  # before any byte of it is hashed or decoded
            return "too_large"
        why = refusal(self.job_key, data, fields.get(b"sig"))
        if why is not None:
            return why
        try:
            message = self.formatter.loads(data)
        except Exception:
            return "not_a_job"
        # exactly what a producer writes: labels (an ack type, a timeout) or arguments taskiq would act on are not
        ours = (message.task_name == TASK_NAME and not message.labels and not message.labels_types and not message.args
                and list(message.kwargs) == ["job"] and isinstance(message.kwargs["job"], str))
        return None if ours else "not_a_job"

    async def refuse(self, entry: str | None, data: bytes, why: str, detail: str = "") -> None:
        """Move an entry to the refused stream with the reason, then ack and delete it: counted,
        logged, and kept for an operator, never graded."""
        await self._remove(entry, REFUSED_STREAM, {
            "reason": why, "detail": detail[:2000], "data": data[:100_000], "consumer": str(self.consumer_name),
            "entry": entry or "", "refused_at": time.time()}, maxlen=REFUSED_MAXLEN)
        self.refused[why] += 1
        log.warning("worker_refused_job", consumer=self.consumer_name, reason=why, detail=detail[:500],
                    entry=entry, stream=REFUSED_STREAM)

    async def _admissible(self, entries: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """The entries this consumer may grade; the rest refused."""
        admitted = []
        for entry_id, fields in entries:
            why = self._why_refused(fields)
            if why is None:
                admitted.append((entry_id, fields))
                continue
            data = fields.get(b"data") if isinstance(fields, dict) else None
            data = data if isinstance(data, bytes) else repr(fields).encode()
            detail = too_large(len(data)) if why == "too_large" else None
            try:
                await self.refuse(text(entry_id), data, why, detail or "")
            except (RedisConnectionError, RedisTimeoutError, OSError, ResponseError) as exc:
                # stays pending, refused when reclaimed (the refused stream a key of another type: said here)
                log.warning("broker_unavailable", consumer=self.consumer_name, error_type=type(exc).__name__,
                            error=str(exc), entry=text(entry_id))
        return admitted

    async def _remove(self, entry: str | None, to: str | None = None, record: Any = None,
                      maxlen: int | None = None) -> None:
        """Copy `record` to stream `to`, then (in one transaction) ack and delete `entry` (each if given).
        The copy goes first on its own: in a MULTI a copy that fails (`to` made a key of another type)
        would not stop the ack and delete, and the entry would be kept nowhere."""
        async with Redis(connection_pool=self.connection_pool) as conn:
            if to is not None:
                await conn.xadd(to, record, maxlen=maxlen, approximate=True)
            pipe = conn.pipeline(transaction=True)
            if entry is not None:
                pipe.xack(STREAM, GROUP, entry)
                pipe.xdel(STREAM, entry)
            await pipe.execute()
        if entry is not None:
            self.held.discard(entry)

    def _message(self, entry_id: Any, fields: Any) -> StreamMessage:
        entry = text(entry_id)
        self.held.add(entry)
        return StreamMessage(data=fields[b"data"], ack=functools.partial(self._remove, entry), entry_id=entry)

    async def listen(self) -> AsyncGenerator[AckableMessage, None]:
        """New entries for this consumer; every `reclaim_after / 2` seconds, even when the stream is
        quiet, also the entries dead consumers left idle for `reclaim_after` seconds. Each round of
        Redis commands runs `detached`: stopping the worker cancels this generator between rounds, never
        a command half way (see `detached`)."""
        next_reclaim = 0.0
        backoff = 0.1
        async with Redis(connection_pool=self.connection_pool) as conn:
            while True:
                reclaim = time.monotonic() >= next_reclaim
                try:
                    entries = await detached(self._round(conn, reclaim))
                except ResponseError as exc:
                    if not str(exc).startswith(("NOGROUP", "UNBLOCKED")):
                        raise
                    # The stream or its group was deleted under us (FLUSHDB, DEL, XGROUP DESTROY): made again,
                    # and reading goes on; entries deleted with it are gone from Redis, not from an outbox.
                    log.warning("broker_stream_gone", consumer=self.consumer_name, error=str(exc))
                    try:
                        await detached(self._declare_consumer_group())
                    except (RedisConnectionError, RedisTimeoutError, OSError, ResponseError):
                        await asyncio.sleep(backoff)  # made at the next round's error, never in a tight loop
                    backoff = min(backoff * 2, 5.0)
                    continue
                except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                    # Redis restarting or unreachable: wait and read again; held entries stay pending.
                    log.warning("broker_unavailable", consumer=self.consumer_name, error_type=type(exc).__name__,
                                error=str(exc), retry_in_s=backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                if reclaim:
                    next_reclaim = time.monotonic() + self.reclaim_after / 2
                backoff = 0.1
                for entry_id, fields in entries:  # held from here on: a cancelled round's entries never are
                    yield self._message(entry_id, fields)

    async def _round(self, conn: Redis, reclaim: bool) -> list[tuple[Any, Any]]:
        """One round: the entries reclaimed from dead consumers when it is time, else (or if there were
        none) the new ones; of those, the ones this consumer may grade."""
        entries = await self._reclaim(conn) if reclaim else []
        if not entries:
            # redis-py's legacy reply shape (its default, on RESP2 and RESP3 alike), never the dict one
            fetched = cast(StreamReply, await conn.xreadgroup(
                GROUP, self.consumer_name, {STREAM: ">"}, block=self.block, count=self.count))
            entries = [entry for _stream, batch in fetched or () for entry in batch]
        return await self._admissible(entries)

    async def _reclaim(self, conn: Redis) -> list[tuple[Any, Any]]:
        claimed: list[tuple[Any, Any]] = []
        cursor: Any = "0-0"
        while True:
            reply = await conn.xautoclaim(STREAM, GROUP, self.consumer_name, min_idle_time=self.idle_timeout,
                                          start_id=cursor, count=self.unacknowledged_batch_size)
            cursor, entries = reply[0], reply[1]
            # Our own held entries come back too when this loop was busy: they are already being graded.
            claimed.extend((entry_id, fields) for entry_id, fields in entries
                           if fields and text(entry_id) not in self.held)
            if cursor in (b"0-0", "0-0") or len(claimed) >= self.unacknowledged_batch_size:
                break
        if claimed:
            claimed = await self._bury_overdelivered(conn, claimed)
        if claimed:
            self.reclaimed += len(claimed)
            log.info("broker_reclaimed", consumer=self.consumer_name, entries=len(claimed))
        return claimed

    async def _bury_overdelivered(self, conn: Redis, claimed: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """The reclaimed entries delivered at most `max_deliveries` times; the others go to the
        dead-letter stream. XAUTOCLAIM has just counted this delivery."""
        pipe = conn.pipeline(transaction=False)
        for entry_id, _ in claimed:
            pipe.xpending_range(STREAM, GROUP, min=entry_id, max=entry_id, count=1)
        pending = await pipe.execute()
        keep = []
        for (entry_id, fields), info in zip(claimed, pending, strict=True):
            deliveries = int(info[0]["times_delivered"]) if info else 0
            if deliveries <= self.max_deliveries or self._why_refused(fields) is not None:
                keep.append((entry_id, fields))  # a refused entry goes on to `_admissible`: refused, never buried
            else:
                await self._bury(text(entry_id), fields, deliveries)
        return keep

    async def _bury(self, entry: str, fields: Any, deliveries: int) -> None:
        """Its run's `error` record first (`on_dead`); only once that is stored is the entry moved to
        the dead-letter stream and acked. A store that fails leaves it pending, for the next reclaim."""
        data = fields.get(b"data", b"")
        if self.on_dead is not None:
            try:
                await self.on_dead(data, deliveries)
            except StoreError:  # the record is not stored: the entry stays pending, buried at a later reclaim
                log.warning("dead_letter_record_not_stored", entry=entry)
                return
            except Exception:  # no record can be made of it: the dead-letter stream keeps it for an operator
                log.exception("dead_letter_record_failed", entry=entry)
        try:
            await self._remove(entry, DEAD_STREAM, {
                "data": data, "sig": fields.get(b"sig", b""), "entry": entry, "deliveries": deliveries,
                "consumer": self.consumer_name or "", "dead_at": time.time()})
        except ResponseError as exc:  # the dead-letter stream a key of another type: pending, buried later
            log.warning("dead_letter_not_kept", entry=entry, error=str(exc))
            return
        self.dead_lettered += 1
        log.error("broker_dead_letter", consumer=self.consumer_name, entry=entry, deliveries=deliveries,
                  dead_stream=DEAD_STREAM,
                  note="every worker that took this job died, stopped or could not store its record")

    async def keep_alive(self) -> None:
        """Reset the idle time of the entries this consumer holds, so no live job is reclaimed."""
        async with Redis(connection_pool=self.connection_pool) as conn:
            while True:
                await asyncio.sleep(self.reclaim_after / 3)
                held: list[StreamIdT] = list(self.held)
                if held:
                    try:
                        await detached(conn.xclaim(STREAM, GROUP, self.consumer_name, min_idle_time=0,
                                                   message_ids=held, justid=True))
                    except Exception as exc:  # Redis away for a moment: the next beat tries again
                        log.warning("broker_keep_alive_failed", error_type=type(exc).__name__, error=str(exc))
