"""`deadline(seconds)` behaves as `asyncio.timeout(seconds)`: each case runs both, side by side,
and expects the same outcome (a judge call's timeout is the one place it replaces the other)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from judgehooks._base.deadline import deadline

BOTH = pytest.mark.parametrize("limit", [asyncio.timeout, deadline], ids=["asyncio.timeout", "deadline"])
Limit = Callable[[float], Any]


async def hang() -> None:
    await asyncio.sleep(3600)


@BOTH
def test_a_call_past_its_deadline_is_cancelled_and_leaves_as_a_timeout(limit: Limit):
    async def main() -> str:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(TimeoutError):
            async with limit(0.05):
                await hang()
        assert loop.time() - start >= 0.05
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
        await asyncio.sleep(0)  # no cancellation left pending on the task
        return "went on"

    assert asyncio.run(main()) == "went on"


@BOTH
def test_a_call_that_ends_in_time_is_never_cancelled_later(limit: Limit):
    async def main() -> int:
        async with limit(0.05):
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.15)  # past the deadline: the timer may fire, and must touch nothing
        return 7

    assert asyncio.run(main()) == 7


@BOTH
def test_a_cancellation_from_outside_stays_a_cancellation(limit: Limit):
    async def main() -> None:
        async def call() -> None:
            async with limit(10):
                await hang()

        task = asyncio.ensure_future(call())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


@BOTH
def test_a_call_that_swallows_the_cancellation_leaves_normally(limit: Limit):
    async def main() -> str:
        async with limit(0.02):
            try:
                await hang()
            except asyncio.CancelledError:
                return "caught"
        return "not reached"

    assert asyncio.run(main()) == "caught"


@BOTH
@pytest.mark.parametrize("inner_first", [True, False])
def test_nested_limits_raise_where_the_shorter_one_is(limit: Limit, inner_first: bool):
    inner, outer = (0.02, 10.0) if inner_first else (10.0, 0.02)

    async def main() -> str:
        try:
            async with asyncio.timeout(outer):
                try:
                    async with limit(inner):
                        await hang()
                except TimeoutError:
                    return "inner"
        except TimeoutError:
            return "outer"
        return "none"

    assert asyncio.run(main()) == ("inner" if inner_first else "outer")


@BOTH
def test_many_calls_in_flight_time_out_exactly_the_ones_that_hang(limit: Limit):
    """200 calls of two lengths at once; every third hangs. Those (and only those) time out, even
    when a hanging call waits at the front of its queue while the ones behind it finish."""

    async def main() -> dict[int, str]:
        results: dict[int, str] = {}

        async def call(i: int) -> None:
            seconds = 0.05 if i % 2 else 0.1
            try:
                async with limit(seconds):
                    await (hang() if i % 3 == 0 else asyncio.sleep(0.001 * (i % 7)))
                results[i] = "answered"
            except TimeoutError:
                results[i] = "timed out"

        await asyncio.gather(*(call(i) for i in range(200)))
        return results

    results = asyncio.run(main())
    assert results == {i: "timed out" if i % 3 == 0 else "answered" for i in range(200)}


def test_deadlines_on_two_loops_in_two_threads_keep_apart():
    """Each loop has its own queue of deadlines: one loop's calls never cancel the other's tasks."""
    outcomes: dict[str, list[str]] = {}

    def run(name: str, hangs: bool) -> None:
        async def main() -> list[str]:
            got = []
            for _ in range(20):
                try:
                    async with deadline(0.01):
                        await (hang() if hangs else asyncio.sleep(0))
                    got.append("answered")
                except TimeoutError:
                    got.append("timed out")
            return got

        outcomes[name] = asyncio.run(main())

    threads = [threading.Thread(target=run, args=("hangs", True)), threading.Thread(target=run, args=("quick", False))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert outcomes == {"hangs": ["timed out"] * 20, "quick": ["answered"] * 20}


@BOTH
def test_outside_an_event_loop_it_is_an_error(limit: Limit):
    async def enter() -> None:
        async with limit(1):
            pass

    coro = enter()
    with pytest.raises(RuntimeError):
        coro.send(None)
    coro.close()


def test_a_loop_that_ran_deadlines_is_freed_once_closed():
    """A lane keeps no reference to its loop, and a finished call's entry none to its task: 20 loops
    made by `asyncio.run`, each with a judge call's deadline, are all collected."""
    import gc
    import weakref

    loops = []

    async def once() -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        async with deadline(60):
            await asyncio.sleep(0)

    for _ in range(20):
        asyncio.run(once())
    gc.collect()
    assert sum(ref() is not None for ref in loops) == 0


def test_finished_calls_behind_a_hanging_one_keep_nothing_alive():
    """A call that hangs at the front of its queue holds its own deadline there; the calls that end
    behind it keep no task (and no result) alive while it waits."""
    import gc
    import weakref

    async def main() -> int:
        results = []

        async def finished() -> bytearray:
            async with deadline(0.5):
                await asyncio.sleep(0)
            return bytearray(1 << 20)

        front = asyncio.ensure_future(_hang_within(0.5))
        await asyncio.sleep(0)
        for _ in range(20):
            task = asyncio.ensure_future(finished())
            await task
            results.append(weakref.ref(task))
            del task
        gc.collect()
        alive = sum(ref() is not None for ref in results)
        with pytest.raises(TimeoutError):
            await front
        return alive

    assert asyncio.run(main()) <= 1  # the last task may still be the loop's last step's (asyncio.timeout: 1 too)


async def _hang_within(seconds: float) -> None:
    async with deadline(seconds):
        await hang()


def test_what_leaves_an_expired_block_another_way_says_the_deadline_passed():
    """As Python 3.13's `asyncio.timeout`: a `CancelledError` subclass leaving the expired block is
    a `TimeoutError` too, and another exception raised while cancelled gets one in its context."""

    class Stopped(asyncio.CancelledError):
        pass

    async def subclass() -> None:
        async with deadline(0.01):
            try:
                await hang()
            except asyncio.CancelledError:
                raise Stopped() from None

    async def other() -> None:
        async with deadline(0.01):
            try:
                await hang()
            except asyncio.CancelledError:
                raise KeyError("cleanup failed") from None

    with pytest.raises(TimeoutError):
        asyncio.run(subclass())
    with pytest.raises(KeyError) as raised:
        asyncio.run(other())
    context = raised.value.__context__
    assert isinstance(context, TimeoutError) and isinstance(context.__context__, asyncio.CancelledError)
