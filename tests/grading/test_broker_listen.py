"""Stopping a worker cancels its stream reader mid-round; no cancellation may be lost in a Redis command.

On Python 3.11 a redis-py command cancelled at the wrong moment can swallow the cancellation and then wait
for a reply forever: an in-process worker then never stopped (seen as a test hanging until pytest-timeout,
about one cancelled read in fifty; never on 3.13). These tests cancel the reader at every suspension point
of its first rounds, one loop iteration apart, against a real redis-server."""

from __future__ import annotations

import asyncio

import pytest
import redis

from judgehooks._grading.redis.broker import STREAM, JudgeStreamBroker


@pytest.fixture
def redis_url(redis_base: str) -> str:
    client = redis.Redis.from_url(redis_base)
    client.flushdb()
    client.close()
    return redis_base


def _reading(rds: redis.Redis, *, blocked: bool = False) -> bool:
    """Whether a client of this test's database is in XREADGROUP (blocked in it, with `blocked`). Only
    this database's: in CI the pytest workers share one server, and another worker's reader is not
    this test's."""
    db = str(rds.connection_pool.connection_kwargs.get("db", 0))
    return any(c.get("cmd") == "xreadgroup" and c.get("db") == db and (not blocked or "b" in c.get("flags", ""))
               for c in rds.client_list())


async def _cancel_after(broker: JudgeStreamBroker, steps: int) -> asyncio.Task:
    """Start one read of the stream, let the loop run `steps` iterations, then cancel it as taskiq does."""
    reader = broker.listen()
    read = asyncio.ensure_future(anext(reader))
    for _ in range(steps):
        await asyncio.sleep(0)
    read.cancel()
    finished, _ = await asyncio.wait({read}, timeout=10)  # XREADGROUP blocks 500 ms at most
    await reader.aclose()
    return read if finished else None


def test_the_stream_reader_stops_whenever_it_is_cancelled(redis_url):
    async def scenario() -> list[int]:
        broker = JudgeStreamBroker(redis_url, consumer_name="c", reclaim_after=2)
        await broker.startup()
        stuck = []
        try:
            for steps in range(120):  # every await of connect, XAUTOCLAIM, XREADGROUP's send and read
                read = await _cancel_after(broker, steps)
                if read is None:
                    stuck.append(steps)
                    break
                assert read.cancelled(), (steps, read)
        finally:
            await asyncio.wait_for(broker.shutdown(), 10)
        return stuck

    assert asyncio.run(scenario()) == []


def test_entries_a_cancelled_round_read_stay_pending_for_a_reclaim(redis_url):
    """The round goes on alone after its reader is cancelled; what it read is not held by this consumer,
    so the keep-alive never touches it, and it is reclaimed once idle like a dead consumer's."""
    rds = redis.Redis.from_url(redis_url)

    async def scenario() -> set[str]:
        broker = JudgeStreamBroker(redis_url, consumer_name="c", reclaim_after=2)
        await broker.startup()
        try:
            reader = broker.listen()
            read = asyncio.ensure_future(anext(reader))
            while not _reading(rds, blocked=True):  # blocked in it now
                await asyncio.sleep(0.01)
            read.cancel()
            rds.xadd(STREAM, {"data": b"not a job"})  # the blocked round reads it after its reader is gone
            await asyncio.wait({read}, timeout=10)
            assert read.cancelled()
            await reader.aclose()
            for _ in range(1000):  # the orphaned round refuses it on its own: copied, then acked and deleted
                if rds.xlen("judgehooks:refused") and not rds.xlen(STREAM):
                    break
                await asyncio.sleep(0.01)
            return set(broker.held)
        finally:
            await asyncio.wait_for(broker.shutdown(), 10)

    held = asyncio.run(scenario())
    assert held == set()
    # read by the orphaned round and refused there (it is not a job): moved to the refused stream, never lost
    assert rds.xlen(STREAM) == 0 and rds.xlen("judgehooks:refused") == 1
    rds.close()


def test_a_stream_deleted_under_a_blocked_reader_is_made_again_and_reading_goes_on(redis_url):
    """FLUSHDB (or DEL, or XGROUP DESTROY) while XREADGROUP blocks answers UNBLOCKED, then NOGROUP:
    the reader makes the stream and group again and reads on, rather than ending the worker."""
    rds = redis.Redis.from_url(redis_url)

    async def scenario() -> None:
        broker = JudgeStreamBroker(redis_url, consumer_name="c", reclaim_after=2)
        await broker.startup()
        reader = broker.listen()
        read = asyncio.ensure_future(anext(reader))
        try:
            while not _reading(rds):
                await asyncio.sleep(0.01)
            rds.flushdb()
            while not rds.exists(STREAM):  # made again by the reader
                await asyncio.sleep(0.01)
            rds.xadd(STREAM, {"data": b"not a job"})
            for _ in range(1000):  # read after the flush: refused, so the reader is alive
                if rds.xlen("judgehooks:refused"):
                    break
                await asyncio.sleep(0.01)
            assert not read.done()
        finally:
            read.cancel()
            await asyncio.wait({read}, timeout=10)
            await reader.aclose()
            await asyncio.wait_for(broker.shutdown(), 10)

    asyncio.run(scenario())
    assert rds.xlen("judgehooks:refused") == 1
    rds.close()


def test_a_key_of_another_type_under_the_stream_name_fails_startup_instead_of_being_read_past(redis_url):
    """Whoever writes to Redis can put a string where the stream goes. Making the group then fails
    with WRONGTYPE: the worker's startup says so, where taskiq-redis's own group setup logs every
    such error at debug level and reads on as if the group were there."""
    rds = redis.Redis.from_url(redis_url)
    rds.set(STREAM, "not a stream")

    async def scenario() -> None:
        broker = JudgeStreamBroker(redis_url, consumer_name="c", reclaim_after=2)
        try:
            with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
                await broker.startup()
        finally:
            await asyncio.wait_for(broker.shutdown(), 10)

    try:
        asyncio.run(scenario())
    finally:
        rds.delete(STREAM)
        rds.close()
