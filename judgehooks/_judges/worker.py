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
from .lines import LineSplitter, json_line, read_chunk, read_json_line
from .litellm import LiteLLMJudge
from .prompt import JudgeRequest
from .wire import MAX_REPLY_BYTES


class _Server(asyncio.Protocol):
    """Reads requests straight off stdin on the event loop (asyncio's pipe transport, no thread, no
    queue): each chunk's requests start as tasks in the same turn of the loop that read them, and the
    replies of one turn are written in one go, not one write per reply."""

    def __init__(self, judge: LiteLLMJudge, out: Any, lines: LineSplitter) -> None:
        self._judge = judge
        # a call's whole time, as the caller's own timeout bounds it there: a reply dripping a byte now
        # and then never trips the read timeout, and the caller that gave up sends no word here
        self._timeout = float(judge.call_kwargs.get("timeout") or 600.0)
        self._out = out
        self._lines = lines
        self._unsent: list[bytes] = []
        #: each call in flight and when it must end; `_sweep` ends the late ones once a second (one
        #: timer for all calls: a timer per call cost more CPU than the rest of the helper's work)
        self._tasks: dict[asyncio.Task[None], float] = {}
        self._late: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()
        self._closed: asyncio.Future[None] = self._loop.create_future()

    async def serve(self, first: list[bytes]) -> None:
        """Answer `first` and every request after it until stdin closes, then the calls in flight."""
        self._start(first)
        sweep = self._loop.create_task(self._sweep())
        await self._loop.connect_read_pipe(lambda: self, open(0, "rb", buffering=0, closefd=False))
        await self._closed
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        sweep.cancel()
        self._flush()

    async def _sweep(self) -> None:
        """End every call past its deadline (within a second of it)."""
        while True:
            await asyncio.sleep(1.0)
            now = self._loop.time()
            for task in [t for t, deadline in self._tasks.items() if deadline <= now and t not in self._late]:
                self._late.add(task)
                task.cancel()

    def _reply(self, line: bytes) -> None:
        self._unsent.append(line)
        if len(self._unsent) == 1:
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        data, self._unsent = b"".join(self._unsent), []
        try:
            self._out.write(data)
            self._out.flush()
        except OSError:  # the parent closed its end: nobody is left to answer
            _leave()

    def data_received(self, data: bytes) -> None:
        self._start(self._lines.feed(data))

    def connection_lost(self, exc: Exception | None) -> None:  # stdin closed (or broken)
        self._start(self._lines.rest())
        if not self._closed.done():
            self._closed.set_result(None)

    def _start(self, lines: list[bytes]) -> None:
        for raw in lines:
            try:
                message = read_json_line(raw)
            except ValueError:
                message = None
            if not isinstance(message, dict):  # only the parent writes here: not a line it wrote
                print(f"judgehooks judge process: skipped a request line that is not a JSON object: {raw[:80]!r}",
                      file=sys.stderr, flush=True)
                continue
            task = self._loop.create_task(self._one(message))
            self._tasks[task] = self._loop.time() + self._timeout
            task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        del self._tasks[task]
        self._late.discard(task)

    async def _one(self, message: dict[str, Any]) -> None:
        try:
            request = JudgeRequest(messages=tuple(message["messages"]), mode=message["mode"], nonce="")
            try:
                r = await self._judge.complete(request)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is None or task not in self._late:
                    raise
                task.uncancel()
                raise TimeoutError(f"the judge call took longer than its timeout of {self._timeout:g} s") from None
            reply: dict[str, Any] = {"id": message["id"], "text": r.text, "model": r.model,
                                     "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                                     "cost_usd": r.cost_usd, "finish_reason": r.finish_reason, "unusable": r.unusable,
                                     "fast": self._judge.client.name == "wire"}
        except Exception as exc:
            error = {"type": type(exc).__name__, "message": str(exc)[:2000], "status": _status_of(exc),
                     "retry_after": retry_after_seconds(exc)}
            reply = {"id": message.get("id"), "error": error}
        self._reply(json_line(reply))


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
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    lines = LineSplitter()  # never sys.stdin: its buffer would keep requests the loop never sees
    first: list[bytes] = []
    while not first:  # the first line says which judge to run
        chunk = read_chunk(0)
        if not chunk:  # the parent died before saying
            _leave()
        first = lines.feed(chunk)
    config = json.loads(first[0])
    judge = LiteLLMJudge(config["model"], structured_output=config["structured_output"],
                         litellm_kwargs=config["kwargs"], fast_path=config.get("fast_path", True),
                         max_reply_bytes=config.get("max_reply_bytes", MAX_REPLY_BYTES))
    judge.warm_up()

    async def serve() -> None:
        await _Server(judge, out, lines).serve(first[1:])

    asyncio.new_event_loop().run_until_complete(serve())


if __name__ == "__main__":  # pragma: no cover
    _main()
