"""The test doubles that ship in `judgehooks.testing`: FakeJudge and capture_records."""

from __future__ import annotations

import asyncio

import pytest

import judgehooks
from judgehooks import AgentAsJudgeEval, EvalRecord, JudgeReply, MemoryStore
from judgehooks.testing import FakeJudge, capture_records


def _judge(fake: FakeJudge, **kwargs) -> AgentAsJudgeEval:
    kwargs.setdefault("store", MemoryStore())
    return AgentAsJudgeEval(criteria="c", scoring_strategy="numeric", threshold=5, judge=fake, retries=0, **kwargs)


def test_a_handler_answers_from_the_request_and_every_request_is_kept():
    def handler(request):
        prompt = "\n".join(m["content"] for m in request.messages)
        return '{"score": 9, "reason": "good"}' if "paris" in prompt else '{"score": 2, "reason": "bad"}'

    fake = FakeJudge(handler)
    result = _judge(fake).run(cases=[{"input": "capital?", "output": "paris"}, {"input": "capital?", "output": "rome"}])
    assert sorted((r.output, r.status) for r in result.records) == [("paris", "passed"), ("rome", "failed")]
    assert fake.calls == 2 and len(fake.requests) == 2
    assert all(request.mode == "numeric" for request in fake.requests)


def test_an_async_handler_may_return_a_whole_reply_with_usage():
    async def handler(request):
        await asyncio.sleep(0)
        return JudgeReply(text='{"score": 7, "reason": "ok"}', model="fake/big", prompt_tokens=11,
                          completion_tokens=3, cost_usd=0.5)

    [record] = _judge(FakeJudge(handler)).run(input="q", output="a").records
    assert (record.status, record.score, record.judge_model) == ("passed", 7, "fake/big")
    assert (record.prompt_tokens, record.completion_tokens, record.cost_usd) == (11, 3, 0.5)


def test_a_handler_that_raises_is_a_judge_error_record_not_a_failure():
    def handler(request):
        raise ConnectionError("judge unreachable")

    fake = FakeJudge(handler)
    [record] = _judge(fake).run(input="q", output="a").records
    assert (record.status, record.error_type, record.passed) == ("error", "ConnectionError", None)
    assert fake.calls == 1  # retries=0


def test_canned_replies_are_used_in_order_and_the_last_repeats():
    fake = FakeJudge(TimeoutError("slow"), '{"score": 6, "reason": "ok"}')
    records = _judge(fake, max_concurrency=1).run(cases=[{"input": "q", "output": str(i)} for i in range(3)]).records
    assert sorted(r.status for r in records) == ["error", "passed", "passed"] and fake.calls == 3


def test_a_fake_judge_is_a_base_judge_and_rejects_mixed_arguments():
    from judgehooks._judges.base import BaseJudge

    assert isinstance(FakeJudge("x"), BaseJudge) and FakeJudge("x", model="m/n").model == "m/n"
    with pytest.raises(ValueError, match="handler"):
        FakeJudge()
    with pytest.raises(ValueError, match="not both"):
        FakeJudge(lambda request: "x", "y")
    with pytest.raises(TypeError, match="texts, exceptions or one handler"):
        FakeJudge(3)


def test_capture_records_collects_what_observers_are_told_only_while_active():
    from judgehooks._base.observers import observers

    before = EvalRecord(id="before", status="passed", evaluator="e", mode="binary")
    during = EvalRecord(id="during", status="failed", evaluator="e", mode="binary")
    observers.notify([before])
    with capture_records() as outer, capture_records() as inner:
        observers.notify([during])
    observers.notify([before])
    assert [r.id for r in outer] == [r.id for r in inner] == ["during"]


def test_capture_records_sees_inline_hook_records_whatever_the_store(make_judge, make_agent, tmp_path):
    from judgehooks import SQLiteStore

    agent = make_agent(make_judge(store=SQLiteStore(tmp_path / "evals.db")), id="agent-c")
    with capture_records() as records:
        out = agent.run("q [[fail]]")
    assert [(r.run_id, r.agent_id, r.status) for r in records] == [(out.run_id, "agent-c", "failed")]


def test_capture_records_sees_offline_records():
    with capture_records() as records:
        result = _judge(FakeJudge('{"score": 8, "reason": "ok"}')).run(input="q", output="a")
    assert [r.id for r in records] == [r.id for r in result.records]


def test_capture_records_sees_background_records_once_drained(make_judge, make_agent, tmp_path):
    agent = make_agent(make_judge(run_in_background=True, outbox=str(tmp_path / "outbox.db")))
    with capture_records() as records:
        out = agent.run("q")
        assert judgehooks.drain(30)
    assert [(r.run_id, r.status) for r in records] == [(out.run_id, "passed")]
