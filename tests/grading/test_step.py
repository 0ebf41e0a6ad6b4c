"""The one claim loop (`Clock`) of session windows, local and in Redis."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from judgehooks._grading.step import Clock


def test_a_piece_of_work_that_raises_is_logged_with_its_key_and_its_slot_freed():
    """A bug in a window's task is said (with a scrubbed traceback), never left for asyncio's
    'exception was never retrieved' at garbage collection; the slot is free for the next claim."""
    async def main() -> tuple[list[dict], Clock]:
        async def boom() -> None:
            raise RuntimeError("a bug in one window, key sk-abcdefghijklmnopqrstuvwxyz0123456789")

        async def claim(limit, busy, key):
            return [("s-1", boom())]

        clock = Clock(claim, 1)
        with capture_logs() as logs:
            [task] = await clock.look()
            await asyncio.wait([task])
            await asyncio.sleep(0)  # the done callbacks
        return logs, clock

    logs, clock = asyncio.run(main())
    [event] = [e for e in logs if e["event"] == "background_work_failed"]
    assert event["key"] == "s-1" and event["error_type"] == "RuntimeError" and "a bug in one window" in event["error"]
    assert "Traceback" in event["exception"] and "sk-abcdefghijklmnop" not in event["exception"] + event["error"]
    assert clock.running == {}
