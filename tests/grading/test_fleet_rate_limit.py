"""`requests_per_minute` holds across a fleet of `judgehooks worker` processes: real redis-server,
two real worker processes, real litellm calling the stub server, which plays a provider that
answers 429 beyond its own limit and counts the judge calls of each window."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from conftest import wait_for

import judgehooks
from judgehooks import SQLiteStore
from judgehooks._grading.redis.ratelimit import SharedRateLimiter
from judgehooks.testing import RedisServer

EVALS = """
import os
from judgehooks import AgentAsJudgeEval, MemoryStore
paced = AgentAsJudgeEval(name="paced", criteria="c", model="openai/judge", api_base=os.environ["FLEET_API_BASE"],
                         api_key="k", retries=0, timeout=60, requests_per_minute=120, store=MemoryStore(),
                         run_in_background=True, broker=os.environ["FLEET_BROKER"],
                         outbox=os.environ["FLEET_OUTBOX"])
"""


@pytest.fixture
def redis_url(redis_base: str) -> str:
    client = redis.Redis.from_url(redis_base)
    client.flushdb()  # no rate-limit state or jobs from an earlier test
    client.close()
    return redis_base


@pytest.fixture
def fleet_env(redis_url, server, tmp_path, monkeypatch):
    (tmp_path / "fleet_evals.py").write_text(EVALS)
    env = {"FLEET_API_BASE": server.base_url, "FLEET_BROKER": redis_url,
           "FLEET_OUTBOX": str(tmp_path / "producer.outbox.db")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(tmp_path))
    return {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def start_worker(env: dict[str, str], redis_url: str, db: str, name: str, tmp_path: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "judgehooks._cli", "worker", "--broker", redis_url, "--store", f"sqlite:///{db}",
         "--name", name, "--concurrency", "8", "--import", "fleet_evals"],
        stdout=subprocess.PIPE, stderr=open(tmp_path / f"{name}.err", "w"), text=True, env=env)
    line = proc.stdout.readline()
    assert "grading from" in line, (line, (tmp_path / f"{name}.err").read_text()[-3000:])
    return proc


@pytest.mark.slow
def test_requests_per_minute_holds_across_two_worker_processes(fleet_env, redis_url, server, make_agent, tmp_path):
    # The provider allows 6 judge calls per 2 s window. The evaluators' 120/min is 4 per window for
    # the whole fleet; two workers pacing themselves alone would send 8, unpaced ones all 24 at once.
    server.configure(judge_limit=6, judge_limit_window_s=2.0)
    db = str(tmp_path / "fleet.db")
    workers = [start_worker(fleet_env, redis_url, db, f"worker-{n}", tmp_path) for n in "ab"]
    try:
        import fleet_evals

        agent = make_agent(fleet_evals.paced)
        run_ids = [agent.run(f"question {i}").run_id for i in range(24)]
        assert judgehooks.drain(30)
        store = SQLiteStore(db)
        wait_for(lambda: len(store.query_sync(limit=None)) >= 24, timeout=120)
        records = store.query_sync(limit=None)
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        outs = [proc.communicate(timeout=60)[0] for proc in workers]
    assert sorted(r.run_id for r in records) == sorted(run_ids)
    assert [r.status for r in records] == ["passed"] * 24, {r.error_message for r in records}
    assert server.settings.counts["judge"] == 24 and server.settings.counts["judge_limited"] == 0
    assert max(server.settings.judge_windows.values()) <= 6
    graded = [int(out.split("stopped; ")[1].split(" graded")[0]) for out in outs]
    assert sum(graded) == 24 and all(graded), outs  # both workers took part


def test_the_shared_limiter_admits_one_call_per_interval_across_clients(redis_url):
    """Many clients asking at once: the Redis script admits exactly one per interval; the rest wait."""

    async def ask(n_clients: int) -> int:
        clients = [redis.asyncio.Redis.from_url(redis_url) for _ in range(n_clients)]
        try:
            limiters = [SharedRateLimiter(c, "judgehooks:ratelimit:test-model", 1) for c in clients]  # 1/min
            return sum([int(await limiter._script(keys=[limiter.key], args=[limiter.interval_us])) == 0
                        for limiter in limiters])
        finally:
            for client in clients:
                await client.aclose()

    assert asyncio.run(ask(10)) == 1  # within one minute, one of ten is admitted


def test_worker_refuses_a_rate_that_is_not_positive(capsys):
    from judgehooks._cli import main

    assert main(["worker", "--broker", "redis://127.0.0.1:1/0", "--requests-per-minute", "0"]) == 2
    assert "--requests-per-minute must be > 0" in capsys.readouterr().err


def test_with_redis_unreachable_a_call_waits_and_asks_again_rather_than_going_unpaced():
    from structlog.testing import capture_logs

    with RedisServer() as probe:  # a port that was free a moment ago, now closed
        closed = probe.url

    async def try_for_a_moment() -> None:
        client = redis.asyncio.Redis.from_url(closed)
        try:
            await asyncio.wait_for(SharedRateLimiter(client, "judgehooks:ratelimit:m", 60).acquire(), 1.0)
        finally:
            await client.aclose()

    with capture_logs() as logs, pytest.raises(TimeoutError):
        asyncio.run(try_for_a_moment())
    assert any(e["event"] == "rate_limit_unavailable" for e in logs)


def test_a_forged_far_future_slot_in_redis_does_not_stall_the_workers(redis_url):
    """Whoever can write to Redis may SET the limiter's key far ahead: a wait longer than one
    interval was never set by a limiter, so it is not honoured."""

    async def ask() -> int:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            limiter = SharedRateLimiter(client, "judgehooks:ratelimit:forged-model", 60)  # 1 s between calls
            await client.set(limiter.key, str(9 * 10**18))
            return int(await limiter._script(keys=[limiter.key], args=[limiter.interval_us]))
        finally:
            await client.aclose()

    assert asyncio.run(ask()) == 0


def test_a_key_of_another_type_in_the_limiters_place_is_taken_over_not_raised_on_every_call(redis_url):
    """Whoever can write to Redis may put a hash where the limiter's key goes. Reading it raised
    WRONGTYPE on every judge call of that model, so every verdict became an `error` record until an
    operator deleted the key; now it is taken as no call made yet, and pacing goes on."""

    async def ask() -> tuple[int, int]:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            limiter = SharedRateLimiter(client, "judgehooks:ratelimit:planted-model", 1)  # 1/min
            await client.hset(limiter.key, "x", "1")
            first = int(await limiter._script(keys=[limiter.key], args=[limiter.interval_us]))
            return first, int(await limiter._script(keys=[limiter.key], args=[limiter.interval_us]))
        finally:
            await client.aclose()

    first, second = asyncio.run(ask())
    assert first == 0 and second > 0  # admitted, then paced
