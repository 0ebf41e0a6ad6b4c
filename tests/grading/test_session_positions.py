"""Issue 26, M2: someone who can write to Redis but lacks the job key cannot change what a session is
judged on. Each turn's position in its session (chain and sequence number) is signed with it, so a
reordered, dropped or replayed turn makes the window one `error` record naming the break, never a
grading of the changed turns. Real Redis, real agno agents, real litellm over HTTP to the stub; the
test is the attacker, writing to the session's keys directly."""

from __future__ import annotations

import asyncio

import redis.asyncio
from test_distributed import redis_url, serve_until, signed
from test_sessions_distributed import in_process_worker, make_producer, rds

import judgehooks
from judgehooks._grading.redis.sessions import DUE, RedisSessions, keys_of, member_of

__all__ = ("make_producer", "rds", "redis_url", "signed")  # fixtures, used by name


def three_turns(make_producer, make_agent, session_id: str) -> tuple[list[str], str]:
    """Three runs of one session, forwarded to Redis (not graded yet): their run ids and the member."""
    agent = make_agent(make_producer())
    run_ids = [agent.run(f"question {i}", session_id=session_id).run_id for i in range(3)]
    assert judgehooks.drain(30)
    return run_ids, member_of("conversation", session_id)


def grade(redis_url, server, done) -> judgehooks.MemoryStore:
    store = judgehooks.MemoryStore()
    asyncio.run(serve_until(in_process_worker(redis_url, store, server), lambda: done(store)))
    return store


def test_reordered_turns_are_an_error_record_not_graded(make_producer, make_agent, redis_url, rds, server):
    run_ids, member = three_turns(make_producer, make_agent, "s-reorder")
    turns = keys_of(member)[2]
    first, last = rds.zscore(turns, run_ids[0]), rds.zscore(turns, run_ids[2])
    rds.zadd(turns, {run_ids[0]: last, run_ids[2]: first})  # the attacker swaps the first and last turns
    store = grade(redis_url, server, lambda s: len(s.records) == 1)
    [record] = store.records
    assert (record.session_id, record.status) == ("s-reorder", "error")
    assert "reordered" in record.error_message and "not graded" in record.error_message
    assert server.settings.counts["judge"] == 0  # the judge never saw the reordered session
    assert rds.zcard(DUE) == 0 and not rds.exists(turns)


def test_a_dropped_turn_is_an_error_record_naming_it(make_producer, make_agent, redis_url, rds, server):
    run_ids, member = three_turns(make_producer, make_agent, "s-drop")
    _, _, turns, data, sigs, _ = keys_of(member)
    rds.zrem(turns, run_ids[1])  # the attacker removes the middle turn, every trace of it
    rds.hdel(data, run_ids[1])
    rds.hdel(sigs, run_ids[1])
    store = grade(redis_url, server, lambda s: len(s.records) == 1)
    [record] = store.records
    assert (record.status, record.run_ids) == ("error", [run_ids[0], run_ids[2]])
    assert "turn(s) 2 of chain" in record.error_message and "missing (dropped)" in record.error_message
    assert server.settings.counts["judge"] == 0


def test_dropping_a_session_s_first_turn_is_seen_too(make_producer, make_agent, redis_url, rds, server):
    run_ids, member = three_turns(make_producer, make_agent, "s-drop-first")
    _, _, turns, data, sigs, _ = keys_of(member)
    for key in (turns, data, sigs):
        (rds.zrem if key == turns else rds.hdel)(key, run_ids[0])
    store = grade(redis_url, server, lambda s: len(s.records) == 1)
    [record] = store.records
    assert record.status == "error" and "turn(s) 1 of chain" in record.error_message
    assert server.settings.counts["judge"] == 0


def test_a_replayed_graded_turn_is_not_graded_again_and_the_session_goes_on(make_producer, make_agent, redis_url,
                                                                            rds, server):
    judge = make_producer()
    agent = make_agent(judge)
    runs = [agent.run(f"question {i}", session_id="s-replay").run_id for i in range(2)]
    assert judgehooks.drain(30)
    member = member_of("conversation", "s-replay")
    _, _, turns, data, sigs, seen = keys_of(member)
    saved = (rds.zscore(turns, runs[1]), rds.hget(data, runs[1]), rds.hget(sigs, runs[1]))  # the attacker keeps a copy
    store = grade(redis_url, server, lambda s: len(s.records) == 1)
    assert store.records[0].status == "passed" and server.settings.counts["judge"] == 1
    # Replayed: the :seen set deleted, then the signed turn pushed again as a producer would push it
    rds.delete(seen)
    at, entry, sig = saved

    async def replay() -> int:
        pool = redis.asyncio.ConnectionPool.from_url(redis_url)
        try:
            return await RedisSessions(pool).push(member, [(runs[1], at, 0.0, entry.decode(), sig)])
        finally:
            await pool.disconnect()

    assert asyncio.run(replay()) == 1  # Redis took it in: only the signed position tells
    asyncio.run(serve_until(in_process_worker(redis_url, store, server), lambda: len(store.records) == 2))
    replayed = store.records[1]
    assert (replayed.status, replayed.run_ids) == ("error", [runs[1]])
    assert "turn(s) 2 of chain" in replayed.error_message and "replayed" in replayed.error_message
    assert server.settings.counts["judge"] == 1  # not graded again
    # the session goes on: its next real turn is graded as usual
    later = agent.run("question 2", session_id="s-replay").run_id
    assert judgehooks.drain(30)
    asyncio.run(serve_until(in_process_worker(redis_url, store, server), lambda: len(store.records) == 3))
    assert (store.records[2].status, store.records[2].run_ids) == ("passed", [later])
    assert server.settings.counts["judge"] == 2


def test_a_forged_graded_through_mark_is_an_error_record(make_producer, make_agent, redis_url, rds, server):
    """Lowering the mark (to make a replay look new) needs the key: an unsigned mark is a break."""
    from judgehooks._grading.redis.sessions import through_key

    run_ids, member = three_turns(make_producer, make_agent, "s-mark")
    store = grade(redis_url, server, lambda s: len(s.records) == 1)
    [chain] = rds.hkeys(through_key(member))
    assert store.records[0].status == "passed"
    rds.hset(through_key(member), chain, b"0:")
    agent_run = make_agent(make_producer()).run("more", session_id="s-mark").run_id
    assert judgehooks.drain(30)
    asyncio.run(serve_until(in_process_worker(redis_url, store, server), lambda: len(store.records) == 2))
    assert (store.records[1].status, store.records[1].run_ids) == ("error", [agent_run])
    assert "forged or unreadable" in store.records[1].error_message


def test_a_forged_huge_sequence_number_is_named_as_one_gap_without_listing_it():
    """Without a job key, anyone who writes to Redis picks a turn's sequence number. One of 10**15
    is a missing-turns break named by its first and last turn and their count, found at once: the
    gap is never spelled out number by number (which would fill the worker's memory)."""
    from types import SimpleNamespace

    from judgehooks._grading.redis.sessionworker import breaks

    turns = SimpleNamespace(positions=[("c1", 1, 1.0), ("c1", 3, 2.0), ("c1", 10**15, 3.0)])
    assert breaks(turns, {}, "m" * 40, None) == [
        f"turn(s) 2-{10**15 - 1} ({10**15 - 3}) of chain c1 are missing (dropped)"]
    one = SimpleNamespace(positions=[("c1", 1, 1.0), ("c1", 3, 2.0)])
    assert breaks(one, {}, "m" * 40, None) == ["turn(s) 2 of chain c1 are missing (dropped)"]
    assert breaks(SimpleNamespace(positions=[("c1", 1, 1.0), ("c1", 2, 2.0)]), {}, "m" * 40, None) == []
    twice = SimpleNamespace(positions=[("c1", 1, 1.0), ("c1", 2, 2.0), ("c1", 2, 3.0)])
    assert breaks(twice, {}, "m" * 40, None) == ["turn 2 of chain c1 appears twice (replayed)"]


def _entry(member_session: str, run_id: str, seq: int, **over) -> bytes:
    import json

    entry = {"evaluator": "conversation", "session_id": member_session, "run_id": run_id, "at": float(seq),
             "chain": "c1", "seq": seq, "sample_rate": 1.0, "spec": None, "turn": {"run": {"run_id": run_id}}}
    entry.update(over)
    for name in [k for k, v in over.items() if v is _DROP]:
        del entry[name]
    return json.dumps(entry).encode()


_DROP = object()


def test_unsigned_entries_without_a_spec_or_under_another_run_id_neither_crash_nor_steer_the_window():
    """Without a job key an entry is whatever Redis holds. One with no "spec" field is a turn with no
    spec (it used to raise KeyError on every claim, so the session never finished nor reached the
    dead letters); one filed under another run's id is refused before its spec or sampling could
    become the window's."""
    from judgehooks._grading.redis.sessions import Window
    from judgehooks._grading.redis.sessionworker import Turns

    member = member_of("conversation", "s1")
    window = Window(member=member, token="t", claims=1, run_ids=("r1", "r2", "r3"), sigs=(None, None, None),
                    entries=(_entry("s1", "r1", 1, spec=_DROP),
                             _entry("s1", "r2", 2),
                             _entry("s1", "elsewhere", 3, spec='{"criteria": "forged"}', sample_rate=0.001)))
    turns = Turns(window, None)
    assert [t["run"]["run_id"] for t in turns.graded] == ["r1", "r2"]
    assert [(run_id, why) for run_id, _, why in turns.refused] == [("r3", "wrong_run")]
    assert (turns.spec, turns.sample_rate) == (None, 1.0)
