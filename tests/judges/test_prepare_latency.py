"""A record's `latency_ms` is the time spent grading: a judge's one-time setup (`prepare`: the first
call imports litellm, ~4 s) is not in it. Proved on a clock the test owns: the judge's prepare step
moves it on by 1,000 s, and the record still shows about the stub's configured delay, not 1,000 s."""

from __future__ import annotations

import time

import pytest

from judgehooks import AgentAsJudgeEval, MemoryStore
from judgehooks._base import stopwatch
from judgehooks._judges.litellm import LiteLLMJudge

SETUP_S = 1_000.0  # what prepare costs on the test's clock
DELAY_MS = 50.0  # what the stub judge takes to answer, really


class Clock:
    """Real time, plus what the judge's setup "took"."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.perf_counter() + self.offset


@pytest.fixture
def clock(monkeypatch) -> Clock:
    found = Clock()
    monkeypatch.setattr(stopwatch, "clock", found)
    return found


def slow_to_prepare(clock: Clock, server) -> LiteLLMJudge:
    class SlowToPrepare(LiteLLMJudge):
        async def prepare(self) -> None:
            clock.offset += SETUP_S
            await super().prepare()

    return SlowToPrepare("openai/judge", api_base=server.base_url, api_key="test-key", timeout=30)


def test_a_judges_setup_is_not_in_the_records_latency(clock, server, make_agent):
    server.configure(judge_delay_ms=DELAY_MS)
    store = MemoryStore()
    judge = AgentAsJudgeEval(criteria="The answer echoes the question.", judge=slow_to_prepare(clock, server),
                             store=store, retry_backoff=0.01)
    make_agent(judge).run("hello")
    [record] = store.records
    assert record.status == "passed" and clock.offset == SETUP_S  # prepared once, inside the grading
    # The stub's delay is in it (a lower bound that holds however slow the machine); the setup's
    # 1,000 s are not (the judge's answer would have to take 10,000 times the stub's delay).
    assert DELAY_MS <= record.latency_ms < SETUP_S * 1000 / 2
