"""The judge process: reads JSON-line requests on stdin, answers on stdout (see `process.py`).

Not imported by the package, so `python -m judgehooks._judges.worker` runs it cleanly. It lives
only for its parent: when the parent is gone (its pipes close, or it is no longer our parent) the
process leaves at once and says nothing; Ctrl-C is the parent's to handle.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from typing import Any

from .base import _status_of, retry_after_seconds
from .lines import json_line, line_batches, read_json_line, write_all
from .litellm import LiteLLMJudge
from .prompt import JudgeRequest


class _Replies:
    """Reply lines written in one go per turn of the loop, not one write per reply."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._lines: list[bytes] = []

    def send(self, line: bytes) -> None:
        self._lines.append(line)
        if len(self._lines) == 1:
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        data, self._lines = b"".join(self._lines), []
        try:
            write_all(self._out, data)
        except OSError:  # the parent closed its end: nobody is left to answer
            _leave()


async def _serve(judge: LiteLLMJudge, lines: asyncio.Queue[bytes | None], out: Any) -> None:
    tasks: set[asyncio.Task[None]] = set()
    replies = _Replies(out)

    async def one(message: dict[str, Any]) -> None:
        request = JudgeRequest(messages=tuple(message["messages"]), mode=message["mode"], nonce="")
        try:
            r = await judge.complete(request)
            reply: dict[str, Any] = {"id": message["id"], "text": r.text, "model": r.model,
                                     "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                                     "cost_usd": r.cost_usd, "fast": judge.route is not None}
        except Exception as exc:
            error = {"type": type(exc).__name__, "message": str(exc)[:2000], "status": _status_of(exc),
                     "retry_after": retry_after_seconds(exc)}
            reply = {"id": message["id"], "error": error}
        replies.send(json_line(reply))

    while True:
        raw = await lines.get()
        if raw is None:
            break
        task = asyncio.ensure_future(one(read_json_line(raw)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
    replies.flush()


def _leave() -> None:
    """Exit now and quietly: the parent that would read the replies is gone."""
    os._exit(0)


def _watch_parent(parent: int) -> None:
    """Leave once the parent has died, even if a process it forked still holds our pipes open."""
    while os.getppid() == parent:
        time.sleep(1.0)
    _leave()


def _main() -> None:  # pragma: no cover - runs in the child process
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    # Replies travel on the original stdout; anything a library prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    batches = line_batches(0)  # never sys.stdin: its buffer would keep requests the reader never sees
    first = next(batches, [])
    if not first:  # the parent died before saying which judge to run
        _leave()
    config = json.loads(first[0])
    judge = LiteLLMJudge(config["model"], structured_output=config["structured_output"],
                         litellm_kwargs=config["kwargs"], fast_path=config.get("fast_path", True))
    judge.warm_up()
    loop = asyncio.new_event_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()

    def feed(batch: list[bytes] | None) -> None:
        for line in batch or ():
            lines.put_nowait(line)
        if batch is None:
            lines.put_nowait(None)

    def reader() -> None:  # one wake-up of the loop per chunk of requests, not per request
        loop.call_soon_threadsafe(feed, first[1:])
        for batch in batches:
            loop.call_soon_threadsafe(feed, batch)
        loop.call_soon_threadsafe(feed, None)

    threading.Thread(target=reader, daemon=True).start()
    loop.run_until_complete(_serve(judge, lines, out))


if __name__ == "__main__":  # pragma: no cover
    _main()
