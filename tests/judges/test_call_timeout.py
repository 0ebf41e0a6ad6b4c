"""A judge call's timeout (`JudgeCall.ask`, `asyncio.timeout` per attempt): with many calls in flight
exactly the ones that hang end as timeout error records (error_type ``TimeoutError``), a call that
answered in time is never cancelled later, and a cancellation from outside the call stays a
cancellation (the caller's, not a record)."""

from __future__ import annotations

import asyncio

import pytest

from judgehooks._base.context import EvalContext
from judgehooks._judges.base import error_name
from judgehooks._judges.call import JudgeCall, RetryPolicy
from judgehooks._judges.prompt import JudgeRequest
from judgehooks.testing import FakeJudge

VERDICT = '{"passed": true, "reason": "fine"}'


def _call(judge: FakeJudge, timeout: float) -> JudgeCall:
    return JudgeCall(judge=judge, criteria="c", mode="binary", threshold=None, timeout=timeout,
                     retry=RetryPolicy(retries=0))


def test_many_calls_in_flight_time_out_exactly_the_ones_that_hang():
    """200 calls of two timeouts at once; every third hangs. Those, and only those, are timeout records."""

    async def answer(request: JudgeRequest) -> str:
        text = request.messages[-1]["content"]
        if "hang" in text:
            await asyncio.sleep(3600)
        await asyncio.sleep(0.001 * (len(text) % 7))
        return VERDICT

    async def main() -> list[str]:
        judge = FakeJudge(answer)
        fast, slow = _call(judge, 0.05), _call(judge, 0.1)
        outcomes = await asyncio.gather(*((fast if i % 2 else slow).ask(
            EvalContext(input=f"q{i}", output="hang" if i % 3 == 0 else f"a{i}")) for i in range(200)))
        return [error_name(o.error) if o.error is not None else "answered" for o in outcomes]

    assert asyncio.run(main()) == ["TimeoutError" if i % 3 == 0 else "answered" for i in range(200)]


def test_a_call_that_answered_in_time_is_never_cancelled_later():
    async def main() -> str:
        outcome = await _call(FakeJudge(VERDICT), 0.05).ask(EvalContext(input="q", output="a"))
        await asyncio.sleep(0.15)  # past the timeout: nothing left may cancel this task
        return "passed" if outcome.passed else "not passed"

    assert asyncio.run(main()) == "passed"


def test_a_cancellation_from_outside_the_call_stays_a_cancellation():
    async def hang(request: JudgeRequest) -> str:
        await asyncio.sleep(3600)
        return VERDICT

    async def main() -> None:
        task = asyncio.ensure_future(_call(FakeJudge(hang), 10).ask(EvalContext(input="q", output="a")))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
