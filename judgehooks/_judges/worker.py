"""The judge process: reads JSON-line requests on stdin, answers on stdout (see `_judgeproc`).

Not imported by the package, so `python -m judgehooks._judges.worker` runs it cleanly.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from typing import Any

from .base import _status_of, retry_after_seconds
from .litellm import LiteLLMJudge
from .prompt import JudgeRequest


async def _serve(judge: LiteLLMJudge, lines: asyncio.Queue[bytes | None], out: Any) -> None:
    tasks: set[asyncio.Task[None]] = set()

    async def one(message: dict[str, Any]) -> None:
        request = JudgeRequest(messages=tuple(message["messages"]), mode=message["mode"], nonce="")
        try:
            r = await judge.complete(request)
            reply: dict[str, Any] = {"id": message["id"], "text": r.text, "model": r.model,
                                     "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                                     "cost_usd": r.cost_usd}
        except Exception as exc:
            error = {"type": type(exc).__name__, "message": str(exc)[:2000], "status": _status_of(exc),
                     "retry_after": retry_after_seconds(exc)}
            reply = {"id": message["id"], "error": error}
        out.write((json.dumps(reply) + "\n").encode())
        out.flush()

    while True:
        raw = await lines.get()
        if raw is None:
            break
        task = asyncio.ensure_future(one(json.loads(raw)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


def _main() -> None:  # pragma: no cover - runs in the child process
    # Replies travel on the original stdout; anything a library prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    config = json.loads(sys.stdin.buffer.readline())
    judge = LiteLLMJudge(config["model"], structured_output=config["structured_output"],
                         litellm_kwargs=config["kwargs"])
    judge.warm_up()
    loop = asyncio.new_event_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()

    def reader() -> None:
        for raw in sys.stdin.buffer:
            loop.call_soon_threadsafe(lines.put_nowait, raw)
        loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=reader, daemon=True).start()
    loop.run_until_complete(_serve(judge, lines, out))


if __name__ == "__main__":  # pragma: no cover
    _main()
