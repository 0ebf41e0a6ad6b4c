"""SessionGrader: grades one session evaluator's conversations once they go quiet.

A clock (`step.Clock`) on the judgehooks loop sleeps until the earliest due time in the session
book (or a poll interval, so sessions that other processes sharing the file left are seen), claims
the due sessions under a lease, and grades each window once through the ordinary `Pipeline` and
`settle` (grade, deliver: store, callbacks, log; then the turns are forgotten). The record is a
session record: `scope="session"`, the window's `run_ids` in order, and an id derived from the
session and the window's first run, so a window graded twice (a crash between storing and
forgetting it) is still one stored record.

`drain()` and exit grade what is due now and leave the rest in the book; `end_session` makes a
session due at once and waits for its record.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
import time
import weakref
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

import anyio.to_thread

from .._base.context import EvalContext
from .._base.log import log
from .._base.outcome import Outcome
from .._base.record import EvalRecord, record_id
from .._base.session import SessionContext, Turn
from .._runtime import runtime
from ..exceptions import EvaluatorError
from .pipeline import Pipeline, make_record
from .sessionbook import Claim, SessionBook
from .step import Clock, settle

#: seconds before a window whose record the store refused is tried again
STORE_RETRY_S = 30.0
#: seconds before turns Redis could not take are forwarded again (broker=)
FORWARD_RETRY_S = 1.0
#: how often the clock folds the session book's WAL into its file (never on the hook path)
CHECKPOINT_EVERY_S = 1.0

_graders: weakref.WeakSet[SessionGrader] = weakref.WeakSet()


def session_record_id(evaluator: str, session_id: str, run_ids: list[str], version: str | None = None) -> str:
    """One window's record id, from its first and last run and the evaluator version: the same in
    every process that grades the same turns the same way, and a new one when a window is graded
    again with more turns or under other criteria (`grade-sessions` after a change), so the store
    keeps that record too instead of ignoring it as a duplicate."""
    window = f"session\x1f{session_id}\x1f{run_ids[0]}\x1f{run_ids[-1]}"
    return record_id(evaluator, window if version is None else f"{window}\x1f{version}")


def window_id(pipeline: Pipeline, session_id: str, run_ids: list[str]) -> str:
    """The id of the record `pipeline` gives the window of these runs."""
    return session_record_id(pipeline.name, session_id, run_ids, pipeline.evaluator.evaluator_version)


def as_session_record(record: EvalRecord, ctx: SessionContext, session_id: str, last_key: str = "") -> EvalRecord:
    """A graded window's record: scope "session", its run ids in order, its own id (`last_key` stands
    in for the runs of a window whose turns cannot be read back)."""
    run_ids = ctx.run_ids
    return dataclasses.replace(record, id=session_record_id(record.evaluator, session_id, run_ids or [last_key],
                                                            record.evaluator_version), run_id=None,
                               session_id=session_id, scope="session", run_ids=run_ids)


class Relay(Protocol):
    """Where a producer with broker= hands its sessions' turns (`judgehooks._grading.redis.sessions`)."""

    async def push(self, claim: Claim) -> bool: ...

    async def end(self, evaluator: str, session_id: str) -> bool: ...


def read_window(session_id: str, turns: Sequence[Any], sample_rate: Any) -> tuple[SessionContext, Exception | None]:
    """A window of turns as stored (JSON data) read back: its context, or an empty one and the error
    naming the turn (or sample rate) that cannot be read."""
    try:
        if type(sample_rate) not in (int, float) or not 0 <= sample_rate <= 1:
            raise ValueError(f"the session's sample_rate {sample_rate!r:.40} is not a number from 0 to 1")
        return SessionContext.of([Turn.from_dict(t) for t in turns]), None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return SessionContext(input="", output="", session_id=session_id), exc


async def grade_window(pipeline: Pipeline, session_id: str, turns: Sequence[Mapping[str, Any]], sample_rate: float,
                       *, last_key: str, error: Exception | None = None) -> EvalRecord | None:
    """The unsaved record of one window of turns as stored (JSON data): graded, or an `error` record
    naming the turn (or sample rate) that cannot be read back, or `error` (`last_key` stands in for
    its last run in the id). None when the store holds the window's record already: a process died
    between storing it and forgetting the turns, or another one graded it; it is not graded, nor
    called back, again."""
    ctx, unread = read_window(session_id, turns, sample_rate)
    error = unread or error
    if await pipeline.stored([window_id(pipeline, session_id, ctx.run_ids or [last_key])]):
        return None
    if error is None:
        record = await pipeline.grade(ctx, sample_rate)
    else:  # a sample rate that does not read back is the error itself: the record says 1.0
        rate = sample_rate if type(sample_rate) in (int, float) and 0 <= sample_rate <= 1 else 1.0
        record = make_record(ctx, pipeline.evaluator, Outcome(error=error), latency_ms=0.0, sample_rate=rate)
    return as_session_record(record, ctx, session_id, last_key)


class SessionGrader:
    """The clock and the grading of one session evaluator (registered with the runtime for drain,
    exit and stats, and here for `end_session`)."""

    clock: Clock
    _loop: asyncio.AbstractEventLoop | None
    _wake_at: float | None  # when the clock wakes (None: not looked yet, nobody wakes it)
    _lock: threading.Lock
    _checkpointed: float
    settled: threading.Event

    def __init__(self, pipeline: Pipeline, book: SessionBook, *, idle_after: float, max_concurrency: int,
                 relay: Relay | None = None) -> None:
        self.pipeline = pipeline
        self.relay = relay  # broker=: turns go on to Redis, graded by workers
        self.book = book  # its claims hold their sessions for the book's lease
        self.idle_after = idle_after
        self.max_concurrency = max_concurrency
        self.poll = min(max(idle_after, 0.05), 10.0)
        self._counts = {"turns": 0, "graded": 0, "resumed": 0, "store_errors": 0, "forwarded": 0,
                        "turns_lost": 0, "already_stored": 0}
        self.reset_after_fork()
        _graders.add(self)

    @property
    def name(self) -> str:
        return self.pipeline.name

    def count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    # ---- the clock --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the clock on the judgehooks loop: it also grades what a dead process left due."""
        if self._loop is not None:
            return
        with self._lock:
            if self._loop is not None:
                return
            loop = runtime.loop()
            self._wake_at = 0.0  # until the clock has looked, nobody needs to wake it
            asyncio.run_coroutine_threadsafe(self.clock.serve(self._round), loop)
            self._loop = loop
        runtime.add_drainable(self)

    def arm(self, due_at: float) -> None:
        """A turn was recorded (the hook path): wake the clock only if it would sleep past `due_at`."""
        if self._loop is None:
            self.start()
        wake = self._wake_at
        if wake is not None and due_at < wake and self._loop is not None:
            self._wake_at = due_at
            self._loop.call_soon_threadsafe(self.clock.wake)

    async def _round(self) -> float:
        """One round of the clock: grade what is due, checkpoint now and then; how long to sleep."""
        try:
            await self.clock.look()
            upcoming = self.book.next_due(self.name)
            if upcoming is None and not self.clock.running:
                self.settled.set()  # nothing open or in flight: `judgehooks resume` waits on this, never polls
            else:
                self.settled.clear()
            if time.monotonic() - self._checkpointed >= CHECKPOINT_EVERY_S:
                self._checkpointed = time.monotonic()
                await anyio.to_thread.run_sync(self.book.upkeep)
        except Exception:
            log.exception("session_clock_failed", evaluator=self.name)
            upcoming = None
        now = time.time()
        wait = self.poll if upcoming is None else min(self.poll, max(upcoming - now, 0.02))
        self._wake_at = now + wait
        return wait

    async def _claim(self, limit: int, busy: Collection[str], session_id: str | None) -> list[tuple[str, Any]]:
        """The due sessions (of one, or up to `limit`) under a lease, each with its grading. A session
        being graded is not claimed: between its window being finished and its task ending, a claim
        would take a lease that nobody grades, for a whole lease."""
        claims = self.book.claim_due(self.name, limit=limit, session_id=session_id, busy=busy)
        return [(claim.session_id, self._grade(claim)) for claim in claims]

    def lost(self, ctx: EvalContext, sample_rate: float, why: str) -> None:
        """A turn the book could not take (the hook path): like a run shed from a full queue, a
        `skipped` record for its run, stored, given to `on_drop`, logged and counted (`turns_lost`)."""
        self.count("turns_lost")
        record = dataclasses.replace(self.pipeline.skipped(ctx, f"session turn not recorded: {why}", sample_rate),
                                     scope="session", run_ids=[ctx.run_id or ""])
        runtime.submit(self.pipeline.deliver, [record])  # drain() waits for it; the run never does

    # ---- grading ----------------------------------------------------------------------------

    async def grade_turns(self, session_id: str, turns: list[Turn], sample_rate: float = 1.0) -> EvalRecord:
        """The unsaved record of one window of a session's turns (also for sessions read from an agno db)."""
        ctx = SessionContext.of(turns)
        return as_session_record(await self.pipeline.grade(ctx, sample_rate), ctx, session_id)

    async def _grade(self, claim: Claim) -> EvalRecord | None:
        """Grade one window and deliver its record (`settle`): the turns are forgotten only once it
        is stored. With a relay (broker=), hand the turns to Redis instead, where a worker grades them."""
        async def done() -> None:
            self.book.finish(claim)

        async def back() -> None:
            self.book.give_back(claim, retry_at=time.time() + STORE_RETRY_S)

        # broker=: a window that reads back goes to Redis; one that does not, or that Redis cannot hold
        # (a turn past what a worker takes), is its error record here
        unfit: EvaluatorError | None = None
        if self.relay is not None and read_window(claim.session_id, claim.turns, claim.sample_rate)[1] is None:
            try:
                forwarded = await self.relay.push(claim)
            except EvaluatorError as exc:
                unfit = exc
            else:
                if forwarded:
                    await done()
                    self.count("forwarded")
                else:  # Redis is down: the turns stay, tried again soon
                    self.book.give_back(claim, retry_at=time.time() + FORWARD_RETRY_S)
                return None
        record = await grade_window(self.pipeline, claim.session_id, claim.turns, claim.sample_rate,
                                    last_key=str(claim.last_seq), error=unfit)
        settled = await settle(self.pipeline, record, done, back)
        self.count("store_errors" if settled == "store_failed" else settled)
        return record

    async def grade_now(self, session_id: str | None = None) -> list[EvalRecord]:
        """Grade what is due now (one session, or all), wait for it and for gradings in flight."""
        waiting = [t for sid, t in self.clock.running.items() if session_id is None or sid == session_id]
        records = [r for r in await asyncio.gather(*waiting) if r is not None]
        while started := await self.clock.look(session_id):
            records += [r for r in await asyncio.gather(*started) if r is not None]
            if session_id is not None:
                break
        return records

    async def end(self, session_id: str) -> list[EvalRecord]:
        """Grade a session at once (its open window), and wait for the record."""
        self.book.end(self.name, session_id)
        records = await self.grade_now(session_id)
        if self.relay is not None:  # the turns are in Redis now: make the session due there, for a worker
            await self.relay.end(self.name, session_id)
        return records

    # ---- the runtime's Drainable ------------------------------------------------------------

    def drain(self, timeout: float | None) -> bool:
        """Grade the sessions already due and wait for them; the others stay in the book."""
        if self._loop is None or runtime.on_loop_thread():
            return True
        future = asyncio.run_coroutine_threadsafe(self.grade_now(), self._loop)
        try:
            future.result(timeout)
        except TimeoutError:
            return False
        except Exception as exc:  # the outbox file went away or cannot be read: the sessions stay where they are
            log.error("session_drain_failed", evaluator=self.name, error_type=type(exc).__name__, error=str(exc),
                      outbox=self.book.path)
            return False
        return True

    def release(self) -> None:
        """At exit: sessions still being graded are given back, for the next process at once."""
        for task in list(self.clock.running.values()):
            task.cancel()
        self.book.release_mine()

    async def relocate(self, loop: asyncio.AbstractEventLoop) -> None:
        """Sessions are graded on the judgehooks loop, inside `judgehooks.lifespan()` too."""

    def reset_after_fork(self) -> None:
        """A fresh clock and book locks (the state of a grader that has not started, again in a forked child)."""
        self._loop, self._wake_at, self._checkpointed = None, None, 0.0
        self.clock = Clock(self._claim, self.max_concurrency)
        self.settled = threading.Event()  # set by a round of the clock that found no session open
        self._lock = threading.Lock()
        self.book.reset_after_fork()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = dict(self._counts)
        try:
            waiting: int | None = self.book.turns_waiting(self.name).get(self.name, 0)
        except sqlite3.Error:  # the outbox file cannot be read now: counters still answer
            waiting = None
        return {"evaluator": self.name, "scope": "session", **counts, "done": counts["graded"],
                "in_flight": len(self.clock.running), "queue_depth": waiting, "turns_waiting": waiting}


def graders(evaluator: Any = None) -> list[SessionGrader]:
    """The session graders of this process (of one evaluator, given by name or itself)."""
    name = evaluator if evaluator is None or isinstance(evaluator, str) else getattr(evaluator, "evaluator_name", None)
    return [g for g in list(_graders) if name is None or g.name == name]


async def end_session_core(session_id: str, evaluator: Any = None) -> list[EvalRecord]:
    """Grade `session_id` now for every session evaluator of this process (or one)."""
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
    found = graders(evaluator)
    if evaluator is not None and not found:
        raise ValueError(f"no session evaluator named {evaluator!r} in this process")
    records: list[EvalRecord] = []
    for grader in found:
        records += await grader.end(session_id)
    return records


def end_session(session_id: str, evaluator: Any = None) -> list[EvalRecord]:
    """Grade a session now, without waiting for `idle_after`: its open window, for every
    `SessionJudge` of this process (or the one given, by name or itself). Returns the records,
    stored. Not from inside a judgehooks callback (use `aend_session` on an event loop)."""
    return runtime.call(end_session_core, session_id, evaluator)


async def aend_session(session_id: str, evaluator: Any = None) -> list[EvalRecord]:
    """`end_session` for async callers: the grading runs on the judgehooks loop."""
    return await runtime.on_loop(end_session_core, session_id, evaluator)
