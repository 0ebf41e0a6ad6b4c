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


#: the two timeouts in flight together: long enough that a loaded machine never times out a call that
#: answers (every call's prompt is built before the first answer is read), a second apart so that the
#: hanging calls of the shorter one are due first by a wide margin
SHORT_S, LONG_S = 2.0, 3.0


def test_many_calls_in_flight_time_out_exactly_the_ones_that_hang():
    """200 calls of two timeouts at once; every third hangs. Those, and only those, are timeout records,
    and the hanging calls of the shorter timeout end before those of the longer one (an order, not a time)."""

    async def answer(request: JudgeRequest) -> str:
        if "hang" in request.messages[-1]["content"]:
            await asyncio.Event().wait()  # never set: only the timeout ends this call
        await asyncio.sleep(0)
        return VERDICT

    async def main() -> tuple[list[str], list[int]]:
        judge = FakeJudge(answer)
        short, long = _call(judge, SHORT_S), _call(judge, LONG_S)
        ended: list[int] = []

        async def ask(i: int) -> str:
            outcome = await (short if i % 2 else long).ask(
                EvalContext(input=f"q{i}", output="hang" if i % 3 == 0 else f"a{i}"))
            ended.append(i)
            return error_name(outcome.error) if outcome.error is not None else "answered"

        return list(await asyncio.gather(*(ask(i) for i in range(200)))), ended

    outcomes, ended = asyncio.run(main())
    assert outcomes == ["TimeoutError" if i % 3 == 0 else "answered" for i in range(200)]
    hung = [i for i in ended if i % 3 == 0]  # in the order they ended
    assert hung == sorted(hung, key=lambda i: i % 2 == 0), hung  # every shorter-timeout one (odd i) first


def test_a_call_that_answered_in_time_is_never_cancelled_later():
    timeout = 1.0

    async def main() -> str:
        outcome = await _call(FakeJudge(VERDICT), timeout).ask(EvalContext(input="q", output="a"))
        await asyncio.sleep(timeout + 0.5)  # past the call's timeout: nothing left may cancel this task
        return "passed" if outcome.passed else "not passed"

    assert asyncio.run(main()) == "passed"


def test_a_cancellation_from_outside_the_call_stays_a_cancellation():
    async def main() -> None:
        asked = asyncio.Event()

        async def hang(request: JudgeRequest) -> str:
            asked.set()
            await asyncio.Event().wait()
            return VERDICT

        task = asyncio.ensure_future(_call(FakeJudge(hang), 60).ask(EvalContext(input="q", output="a")))
        await asyncio.wait_for(asked.wait(), 60)  # cancelled inside the judge call, within its timeout
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
