"""The one admission path's leftovers (issue 26): callbacks assigned later reach every path, each
evaluator keeps its own `requests_per_minute`, and an evaluator rebuilt from a job grades under
the spend caps and rate its process set. The controls on every path: `test_matrix.py`."""

from __future__ import annotations

import json

import pytest
from agno.agent import Agent
from conftest import model

import judgehooks
from judgehooks import AgentAsJudgeEval, MemoryStore, SessionJudge
from judgehooks._evaluators.spec import JobRebuild, rebuild
from judgehooks._grading.ratelimit import Pace, RateLimiter


def test_on_fail_assigned_to_a_built_session_judge_is_called(server, tmp_path):
    """Before: the session grader kept the pipeline it was built with, so a callback assigned
    after the first run was accepted and never called."""
    store = MemoryStore()
    judge = SessionJudge("The assistant echoes the user.", model="openai/judge", api_base=server.base_url,
                         api_key="k", idle_after=3600, store=store, outbox=str(tmp_path / "book.db"))
    agent = Agent(model=model(server), post_hooks=[judge], telemetry=False)
    agent.run("hello", session_id="first")
    judgehooks.end_session("first", judge)  # built and graded: the grader holds its pipeline now
    failed = []
    judge.on_fail = failed.append
    agent.run("bad [[fail]]", session_id="second")
    [record] = judgehooks.end_session("second", judge)
    assert record.status == "failed"
    judgehooks.drain(30)
    assert [r.id for r in failed] == [record.id]


class Clock:
    """Time passes only when a limiter sleeps."""

    def __init__(self) -> None:
        self.now, self.slept = 100.0, []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.mark.anyio
async def test_requests_per_minute_spaces_judge_calls():
    clock = Clock()
    limiter = RateLimiter(6000, clock=clock, sleep=clock.sleep)  # one call per 10 ms
    await limiter.acquire()
    first_slot = limiter._last
    for _ in range(4):
        await limiter.acquire()  # each waits for its own slot: back-to-back calls are spaced, not bunched
    assert limiter._last - first_slot == pytest.approx(4 * limiter.interval)
    assert clock.slept == pytest.approx([limiter.interval] * 4)
    clock.now += 1.0  # a caller who comes after a quiet second goes at once, and earns no burst
    await limiter.acquire()
    await limiter.acquire()
    assert clock.slept == pytest.approx([limiter.interval] * 5)
    assert RateLimiter.for_model("m") is RateLimiter.for_model("m")


@pytest.mark.anyio
async def test_each_evaluator_keeps_its_own_rate_on_a_shared_judge_model(server):
    """Before: the limiter was keyed by model alone and rebuilt with the rate of the last evaluator
    constructed, so that evaluator's rate held for every evaluator of the model."""
    judge = dict(model="openai/shared-rate", api_base=server.base_url, api_key="k")
    fast = AgentAsJudgeEval(criteria="c", name="fast", requests_per_minute=6000, store=MemoryStore(), **judge)
    slow = AgentAsJudgeEval(criteria="c", name="slow", requests_per_minute=60, store=MemoryStore(), **judge)
    fast_pace, slow_pace = fast._pipeline.pace, slow._pipeline.pace
    assert (fast_pace.requests_per_minute, slow_pace.requests_per_minute) == (6000, 60)
    assert fast_pace.limiter is slow_pace.limiter is RateLimiter.for_model("openai/shared-rate")
    clock = Clock()
    limiter = RateLimiter(clock=clock, sleep=clock.sleep)  # the same sharing, on a clock the test owns
    fast_pace = Pace(6000, "m", limiter)
    slow_pace = Pace(60, "m", limiter)
    for _ in range(3):
        await fast_pace.wait()
    assert clock.slept == pytest.approx([0.01, 0.01])  # 10 ms apart, not the slow evaluator's second
    await slow_pace.wait()  # a second after the model's last call, whoever made it
    assert clock.slept[-1] == pytest.approx(1.0)


def test_a_rebuilt_evaluator_grades_under_the_caps_and_rate_its_process_set(server, tmp_path, redis_base):
    """Before: a job's spec held only the evaluator's own settings, so `judgehooks resume` and
    `judgehooks worker --rebuild` graded without spend caps or rate."""
    from judgehooks._grading.redis.ratelimit import SharedRateLimiter
    from judgehooks._grading.redis.spend import RedisLedger
    from judgehooks._grading.redis.worker import Worker

    app = AgentAsJudgeEval(criteria="c", name="capped", model="openai/judge", api_base=server.base_url, api_key="k",
                           max_calls=2, per="day", budget="team", requests_per_minute=120, store=MemoryStore(),
                           spend_ledger=str(tmp_path / "spend.db"))
    spec = app._shell._spec
    assert spec["deployment"] == {"max_calls": 2, "per": "day", "budget": "team", "requests_per_minute": 120,
                                  "spend_ledger": str(tmp_path / "spend.db")}
    resumed = rebuild(json.loads(json.dumps(spec)), store=MemoryStore(), run_in_background=False)
    settings = resumed.hook_settings
    assert (settings.max_calls, settings.per, settings.budget, settings.requests_per_minute) == (2, "day", "team", 120)
    assert settings.spend_ledger == str(tmp_path / "spend.db")  # resume counts with the application's processes
    rebuilt = JobRebuild(allow=frozenset({"AgentAsJudgeEval"}), model="openai/judge", api_base=server.base_url)
    built = rebuilt(json.loads(json.dumps(spec)), store=MemoryStore(), run_in_background=False, spill=False)
    assert (built.hook_settings.max_calls, built.hook_settings.requests_per_minute) == (2, 120)
    assert built.hook_settings.spend_ledger is None  # a job never names a file on the worker
    worker = Worker(redis_base, MemoryStore(), rebuild=rebuilt)
    pipeline = worker._pipeline("capped", json.dumps(spec))
    assert isinstance(pipeline.spend.ledger, RedisLedger)  # counted for the whole fleet
    assert isinstance(pipeline.pace.limiter, SharedRateLimiter) and pipeline.pace.requests_per_minute == 120
