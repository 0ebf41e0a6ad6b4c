"""Judge calls in a helper process, so litellm's client CPU never holds the caller's GIL.

litellm spends ~3-5 ms of CPU per call. In-process, that CPU competes for the GIL with the
application's own threads (an agent's `run()` waits up to a GIL switch interval, 5 ms, behind it)
and caps grading at one core. `ProcessJudge` sends each request to a child process
(`python -m judgehooks._judges.worker`, a clean interpreter: nothing of the parent's `__main__` is
re-run) over pipes as JSON lines; the child runs a `LiteLLMJudge` on its own event loop with
many calls in flight. The parent keeps everything else: records, stores, callbacks.

Errors cross the pipe as values (type name, status code, Retry-After, message) and come back as
`RemoteJudgeError`, which the retry policy reads like the original. If the child dies, pending
calls fail as retryable errors and the next call starts a new child.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import threading
from typing import Any

from .._base.log import log
from .._runtime import runtime
from ..exceptions import JudgeProcessDied, RemoteJudgeError
from .base import BaseJudge, JudgeReply
from .lines import json_line, line_batches, read_json_line
from .litellm import LiteLLMJudge
from .prompt import JudgeRequest


class _Child:
    """One judge process and the calls waiting on it."""

    def __init__(self, config: dict[str, Any]) -> None:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True")}
        self.proc = subprocess.Popen([sys.executable, "-m", "judgehooks._judges.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(config) + "\n").encode())
        self.proc.stdin.flush()  # now: the process warms up while no call is made yet
        self._write_lock = threading.Lock()
        self._unsent: dict[asyncio.AbstractEventLoop, list[bytes]] = {}  # per loop: lines for its next flush
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self.alive = True
        threading.Thread(target=self._read, name="judgehooks-judgeproc-reader", daemon=True).start()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def send(self, payload: dict[str, Any]) -> asyncio.Future[Any]:
        if not self.alive:  # died between choosing it and now: fail now, not at the timeout
            raise JudgeProcessDied("judge process is gone")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        call_id = next(self._ids)
        with self._lock:
            self._pending[call_id] = (loop, future)
        line = json_line({"id": call_id, **payload})
        with self._write_lock:  # the calls a loop makes in one turn go down the pipe in one write
            unsent = self._unsent.setdefault(loop, [])
            unsent.append(line)
            first = len(unsent) == 1
        if first:
            loop.call_soon(self._flush, loop)
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            with self._write_lock:
                data = b"".join(self._unsent.pop(loop, ()))
                assert self.proc.stdin is not None
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
        except (OSError, ValueError) as exc:  # ValueError: closed by `close`
            self._fail_all(f"judge process is gone: {exc}")

    def _read(self) -> None:
        """Replies in chunks of whole lines: each chunk's replies are resolved with one wake-up of
        each waiting loop, not one per reply."""
        assert self.proc.stdout is not None
        for lines in line_batches(self.proc.stdout.fileno()):
            self._answer(lines)
        self._fail_all(f"judge process exited with code {self.proc.wait()}")

    def _answer(self, lines: list[bytes]) -> None:
        ready: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], dict[str, Any]]]] = {}
        for raw in lines:
            try:
                reply = read_json_line(raw)
                with self._lock:
                    waiter = self._pending.pop(reply["id"], None)
            except (ValueError, KeyError, TypeError):  # TypeError: no object, or an id no call has (a list)
                log.warning("judge_process_bad_line", line=raw[:200].decode("utf-8", "replace"))
                continue
            if waiter is not None:
                ready.setdefault(waiter[0], []).append((waiter[1], reply))
        for loop, answers in ready.items():
            try:
                loop.call_soon_threadsafe(_resolve_all, answers)
            except RuntimeError:  # that loop is closed: nobody waits there; the other loops' answers still go
                pass

    def _fail_all(self, message: str) -> None:
        self.alive = False
        with self._lock:
            waiters, self._pending = list(self._pending.values()), {}
        died = {"error": {"type": "JudgeProcessDied", "message": message, "status": 503}}
        for loop, future in waiters:
            loop.call_soon_threadsafe(_resolve_all, [(future, died)])

    def close(self) -> None:
        self.alive = False
        try:
            assert self.proc.stdin is not None
            with self._write_lock:  # calls made since the last flush still go
                unsent, self._unsent = b"".join(b"".join(lines) for lines in self._unsent.values()), {}
                self.proc.stdin.write(unsent)
                self.proc.stdin.close()
            self.proc.wait(5)
        except Exception:
            self.proc.kill()


def _resolve_all(answers: list[tuple[asyncio.Future[Any], dict[str, Any]]]) -> None:
    for future, reply in answers:
        if not future.done():
            future.set_result(reply)


_children: dict[str, list[_Child]] = {}
_children_lock = threading.Lock()


def _child_for(key: str, config: dict[str, Any], processes: int) -> _Child:
    """Up to `processes` judge processes per distinct judge configuration (`key`: the configuration
    as JSON), shared by every evaluator using it; each call goes to the one with the fewest calls in
    flight."""
    with _children_lock:
        pool = [child for child in _children.get(key, []) if child.alive]
        if len(pool) < processes and all(child.in_flight for child in pool):  # none idle: one more
            pool.append(_Child(config))
        _children[key] = pool
        return min(pool, key=lambda child: child.in_flight)


def close_all() -> None:
    """Stop every judge process (their stdin closes; each finishes its in-flight calls and exits)."""
    with _children_lock:
        children = [child for pool in _children.values() for child in pool]
        _children.clear()
    for child in children:
        child.close()


_orphans: list[Any] = []


def _forget_after_fork() -> None:
    """In a forked child the parent's judge processes and their reader threads are not ours; they
    stay referenced so collecting them does not close the parent's pipes."""
    _orphans.append(dict(_children))
    _children.clear()


runtime.add_closer(close_all, order=2)  # at exit, after stores have closed
runtime.on_fork(_forget_after_fork)


class ProcessJudge(BaseJudge):
    """A `LiteLLMJudge` that runs in a helper process. Same settings, same results."""

    _last: tuple[_Child, int] | None = None  # (the helper last used, in which process): a cache, not state

    def __init__(self, judge: LiteLLMJudge, processes: int = 1) -> None:
        self.model = judge.model
        self.processes = processes
        self.max_tokens = judge.max_tokens
        self._config: dict[str, Any] = {"model": judge.model, "structured_output": judge.structured_output,
                                        "kwargs": judge.call_kwargs, "fast_path": judge.fast_path,
                                        "max_reply_bytes": judge.max_reply_bytes}
        self._key = json.dumps(self._config, sort_keys=True, default=str)  # once, not on every call
        #: Whether the helper process sent its last answered call through the wire client (None
        #: before the first answer): the helper says so in each reply.
        self.fast_path_taken: bool | None = None

    def __getstate__(self) -> dict[str, Any]:
        """A copy (or pickle) finds its helper process again: the one this judge last used is not state."""
        return {**self.__dict__, "_last": None}

    @property
    def endpoint(self) -> str | None:
        """The ``api_base`` the helper process calls, or None for the provider's default."""
        given = self._config["kwargs"].get("api_base")
        return given if isinstance(given, str) and given else None

    def _ensure(self) -> _Child:
        last = self._last  # one helper process for this configuration: the live one used last, in this process
        if last is not None and last[0].alive and last[1] == os.getpid() and self.processes == 1 and \
                len(_children.get(self._key, ())) == 1:  # a judge allowed more shares the pool: pick the least busy
            return last[0]
        child = _child_for(self._key, self._config, self.processes)
        self._last = (child, os.getpid())
        return child

    def warm_up(self) -> None:
        self._ensure()

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        reply = await self._ensure().send({"messages": list(request.messages), "mode": request.mode})
        error = reply.get("error")
        if error is not None and error["type"] == "JudgeProcessDied":
            raise JudgeProcessDied(error["message"])
        if error is not None:
            raise RemoteJudgeError(error["type"], error["message"], error.get("status"), error.get("retry_after"))
        self.fast_path_taken = reply.get("fast") is True
        return JudgeReply(text=reply["text"], model=reply.get("model"), prompt_tokens=reply.get("prompt_tokens"),
                          completion_tokens=reply.get("completion_tokens"), cost_usd=reply.get("cost_usd"),
                          finish_reason=reply.get("finish_reason"), unusable=reply.get("unusable"))
