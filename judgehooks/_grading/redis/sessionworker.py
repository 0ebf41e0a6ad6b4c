"""The worker's session clock: takes due sessions from Redis and grades each window once.

Beside its stream receiver, every `judgehooks worker` polls the due set. A due session is claimed
in one Lua step (so two workers never both take it) under a lease of `lease` seconds (the worker's
``--reclaim-after``), renewed every third of it while the worker grades: a live worker keeps its
session however slow the judge, a killed one stops renewing, and once its lease lapses the next
worker to look takes the session over. The window's record has an id derived from the session and
its first and last run, so a window graded twice (a worker that stalled past its lease) is still
one stored record. The turns are forgotten only once the record is stored.

Everything read back is checked: an entry past `MAX_ENTRY_BYTES` is refused (`too_large`) before
its signature is checked or a byte of it decoded; with a job key, a turn whose signature is missing
or wrong is moved to the refused stream (counted, logged) and never graded; an entry that is not a
judgehooks turn of this session is refused the same way; a member of the due set that names no
session is dropped. A session taken over `max_deliveries` times without being finished (it kills
its workers) ends as one `error` record and its entries move to ``judgehooks:sessions:dead``.

Each turn's signed position (chain and sequence number) is checked against Redis's order and
against the signed mark of what was graded already: a window whose turns Redis reordered, that
misses a turn (a gap in a chain) or that holds a turn graded before (a replay) is one `error`
record naming the break, never graded on those turns; its turns are then forgotten and the mark
moves past them, so the session goes on. A turn dropped from the end of a session shows when the
session's next turn arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from redis.exceptions import RedisError

from ..._base.log import log
from ..pipeline import Pipeline
from ..sessions import STORE_RETRY_S, grade_window, window_id
from ..step import Clock, settle
from . import too_large
from .broker import JudgeStreamBroker
from .detached import detached
from .sessions import DEAD_STREAM, DUE, RedisSessions, Window, is_member, member_of, signed_text, through_text
from .signing import refusal, sign

#: the pipeline grading an evaluator's sessions (by name and spec text), as for run jobs
PipelineFor = Callable[[str, str | None], Pipeline]
#: the pipeline whose every record is an `error` naming why (an evaluator name, why)
FailedPipeline = Callable[[str, str], Pipeline]


class Turns:
    """A window's entries, checked: the turns to grade (in order), and what to refuse and why."""

    def __init__(self, window: Window, key: bytes | None) -> None:
        self.graded: list[dict[str, Any]] = []
        self.run_ids: list[str] = []  # the graded turns' (their entries name them, as the turns do)
        self.refused: list[tuple[str, bytes, str]] = []  # run id, raw entry, why
        self.evaluator: str | None = None
        self.session_id: str | None = None
        self.spec: str | None = None
        self.sample_rate = 1.0
        #: each graded turn's signed position and run time, in Redis's order
        self.positions: list[tuple[str, int, float]] = []
        for run_id, raw, sig in zip(window.run_ids, window.entries, window.sigs, strict=True):
            entry = self._check(window.member, key, run_id, raw, sig)
            if isinstance(entry, str):
                self.refused.append((run_id, raw if isinstance(raw, bytes) else b"", entry))
            else:
                self.graded.append(entry["turn"])
                self.run_ids.append(run_id)
                self.positions.append((entry["chain"], entry["seq"], float(entry["at"])))

    def _check(self, member: str, key: bytes | None, run_id: str, raw: Any, sig: Any) -> str | dict[str, Any]:
        """Why this entry is refused, or the entry (and its session's settings are kept)."""
        if not isinstance(raw, bytes):
            return "missing_turn"
        if too_large(len(raw)) is not None:  # before any byte of it is hashed or decoded
            return "too_large"
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):  # nested past Python's stack: refused as any unreadable turn
            entry = None
        # the position the signature covers is read from the entry: a changed one fails the check
        chain, seq = (entry.get("chain"), entry.get("seq")) if isinstance(entry, dict) else (None, None)
        if not isinstance(chain, str) or isinstance(seq, bool) or not isinstance(seq, int):
            chain, seq = "", 0
        why = refusal(key, signed_text(member, chain, seq, raw.decode("utf-8", "replace")),
                      sig if isinstance(sig, bytes) else None)
        if why is not None:
            return why
        if not isinstance(entry, dict):
            return "bad_turn"
        rate = entry.get("sample_rate", 1.0)
        if not isinstance(entry.get("turn"), dict) or not isinstance(entry.get("spec"), (str, type(None))) \
                or not all(isinstance(entry.get(name), str) for name in ("evaluator", "session_id", "run_id")) \
                or not chain or seq < 1 or not _number(entry.get("at")) or not _number(rate) or not 0 < rate <= 1:
            return "bad_turn"
        if member_of(entry["evaluator"], entry["session_id"]) != member:  # filed under another session
            return "wrong_session"
        if entry["run_id"] != run_id:
            return "wrong_run"
        self.evaluator, self.session_id, self.spec, self.sample_rate = (entry["evaluator"], entry["session_id"],
                                                                        entry.get("spec"), float(rate))
        return entry


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _mark(raw: bytes | None, member: str, chain: str, key: bytes | None) -> int | None:
    """A graded-through mark's sequence number; None when it does not hold (unreadable, or its
    signature is missing or wrong)."""
    if raw is None:
        return 0
    text, _, sig = raw.decode("utf-8", "replace").partition(":")
    if not text.isdigit() or len(text) > 18:
        return None
    seq = int(text)
    if refusal(key, through_text(member, chain, seq), sig.encode() if sig else None) is not None:
        return None
    return seq


def breaks(turns: Turns, marks: dict[str, bytes], member: str, key: bytes | None) -> list[str]:
    """What is wrong with a window's signed positions (empty when nothing is): turns out of their
    signed order, a sequence number graded already (a replay), or one missing (a dropped turn)."""
    chains: dict[str, list[int]] = {}
    for chain, seq, _ in turns.positions:
        chains.setdefault(chain, []).append(seq)
    times = [at for _, _, at in turns.positions]
    found = []
    if times != sorted(times) or any(seqs != sorted(seqs) for seqs in chains.values()):
        found.append("turns are out of their signed order (reordered)")
    for chain, seqs in chains.items():
        through = _mark(marks.get(chain), member, chain, key)
        if through is None:
            found.append(f"the graded-through mark of chain {chain} is forged or unreadable")
            continue
        counts = Counter(seqs)
        ordered = sorted(counts)
        if twice := [s for s in ordered if counts[s] > 1]:  # named by the turn that is there twice
            found.append(f"turn {twice[0]} of chain {chain} appears twice (replayed)")
        if replayed := [s for s in ordered if s <= through]:
            found.append(f"turn(s) {_span(replayed[0], replayed[-1], len(replayed))} of chain {chain} were "
                         "graded already (replayed)")
        # the gaps as (first, last) pairs, never as every number in them: a forged sequence number
        # of 10**15 (no job key) is one gap to name, not a list that fills the worker's memory
        above = [s for s in ordered if s > through]
        if gaps := [(a + 1, b - 1) for a, b in zip([through, *above], above, strict=False) if b > a + 1]:
            found.append(f"turn(s) {_span(gaps[0][0], gaps[-1][1], sum(b - a + 1 for a, b in gaps))} of chain "
                         f"{chain} are missing (dropped)")
    return found


def _span(first: int, last: int, count: int) -> str:
    return str(first) if count == 1 else f"{first}-{last} ({count})"


class SessionClock:
    """Grades due sessions from Redis, `concurrency` at a time, for one worker."""

    def __init__(self, broker: JudgeStreamBroker, pipeline_for: PipelineFor, failed: FailedPipeline, *,
                 concurrency: int, lease: float, max_deliveries: int) -> None:
        self.broker = broker
        self.sessions = RedisSessions(broker.connection_pool)
        self.pipeline_for = pipeline_for
        self.failed = failed
        self.lease = lease
        self.poll = min(1.0, lease / 4)
        self.max_deliveries = max_deliveries
        self.token = f"{broker.consumer_name}:{uuid.uuid4().hex[:8]}"
        self.clock = Clock(self._claim, concurrency)
        self.counts = {"sessions_graded": 0, "sessions_taken_over": 0, "sessions_dead_lettered": 0,
                       "sessions_store_failed": 0, "sessions_already_stored": 0, "sessions_tampered": 0}

    async def serve(self, stop: asyncio.Event, shutdown_timeout: float) -> None:
        """Take and grade due sessions until `stop`; then give running ones `shutdown_timeout`
        seconds and hand the rest back (due at once, for another worker)."""
        backoff = 0.1

        async def between() -> float:
            nonlocal backoff
            try:
                await self.clock.look()
            except (RedisError, OSError) as exc:
                log.warning("broker_unavailable", consumer=self.broker.consumer_name, error_type=type(exc).__name__,
                            error=str(exc), retry_in_s=backoff)
                wait, backoff = backoff, min(backoff * 2, 5.0)
                return wait
            backoff = 0.1
            return self.poll

        await self.clock.serve(between, stop)
        await self.clock.finish(shutdown_timeout)

    async def _claim(self, limit: int, busy: Collection[str], _key: str | None) -> list[tuple[str, Any]]:
        now, taken = time.time(), []
        for member in await self.sessions.due(now, limit):
            if member in busy:
                continue
            if not is_member(member):  # not a session of ours: never a key built from it
                await self.sessions.redis.zrem(DUE, member)
                await self.broker.refuse(None, member.encode(), "bad_session", "a due-set member that names no session")
                continue
            window = await self.sessions.claim(member, self.token, now=now, lease=self.lease)
            if window is None:  # another worker took it first, or it had no turns left
                continue
            if window.claims > 1:
                self.counts["sessions_taken_over"] += 1
                log.info("session_taken_over", consumer=self.broker.consumer_name, session=member,
                         claims=window.claims)
            taken.append((member, self._grade(window)))
        return taken

    async def _grade(self, window: Window) -> None:
        renewing = asyncio.create_task(self._renew(window))
        try:
            await self._grade_window(window)
        except asyncio.CancelledError:  # stopping: hand the session back for another worker at once
            await asyncio.shield(self._give_back(window, time.time()))
            raise
        except Exception:  # Redis went away mid-way: the lease lapses and the session is taken again
            log.exception("session_grading_failed", consumer=self.broker.consumer_name, session=window.member)
        finally:
            renewing.cancel()

    async def _renew(self, window: Window) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                # cancelled: between commands
                if not await detached(self.sessions.hold(window, time.time() + self.lease)):
                    log.warning("session_lease_lost", consumer=self.broker.consumer_name, session=window.member,
                                note="another worker took it over; the record id keeps one stored record")
                    return
            except (RedisError, OSError):
                continue

    async def _give_back(self, window: Window, retry_at: float) -> None:
        with contextlib.suppress(RedisError, OSError):  # its lease lapses instead
            await self.sessions.hold(window, retry_at, back=True)

    async def _grade_window(self, window: Window) -> None:
        key = self.broker.job_key
        turns = Turns(window, key)
        for run_id, raw, why in turns.refused:
            size = f": {too_large(len(raw))}" if why == "too_large" else ""
            await self.broker.refuse(None, raw, why, f"session turn {run_id!r} of {window.member}{size}")
        if not turns.graded or turns.evaluator is None or turns.session_id is None:
            await self.sessions.finish(window)  # nothing authentic to grade: all refused
            return
        marks = await self.sessions.through(window.member)
        broken = breaks(turns, marks, window.member, key)
        dead = window.claims > self.max_deliveries
        if dead:
            pipeline = self.failed(turns.evaluator, (
                f"the session was taken {window.claims} times and no worker finished grading it (each died or "
                f"stopped while grading it); its turns are kept in the Redis stream {DEAD_STREAM!r}"))
        else:
            pipeline = self.pipeline_for(turns.evaluator, turns.spec)
            if broken and not await pipeline.stored([window_id(pipeline, turns.session_id, turns.run_ids)]):
                # Never graded on turns Redis changed: one `error` record naming the break, and the
                # session goes on past it. (A window stored already, re-offered whole, is not graded again.)
                self.counts["sessions_tampered"] += 1
                log.error("session_tampered", consumer=self.broker.consumer_name, session=window.member,
                          evaluator=turns.evaluator, breaks=broken)
                pipeline = self.failed(turns.evaluator, (
                    "the session's turns in Redis were changed by someone without the job key: " + "; ".join(broken)
                    + ". Each turn's position in its session is signed; this window is not graded on them"))
        record = await grade_window(pipeline, turns.session_id, turns.graded, turns.sample_rate,
                                    last_key=window.run_ids[-1])

        async def done() -> None:  # the record is stored (or was already): the turns go, the mark moves
            if dead and record is not None:
                await self._dead_letter(window, turns)
            await self._mark_through(window.member, turns, marks, key)
            await self.sessions.finish(window)

        # not stored: the session waits, its turns kept, and is tried again
        settled = await settle(pipeline, record, done, lambda: self._give_back(window, time.time() + STORE_RETRY_S))
        if settled != "graded" or (not dead and not broken):
            self.counts[f"sessions_{settled}"] += 1

    async def _dead_letter(self, window: Window, turns: Turns) -> None:
        await self.sessions.redis.xadd(DEAD_STREAM, {
            "session": window.member, "evaluator": turns.evaluator or "", "session_id": turns.session_id or "",
            "claims": window.claims, "entries": json.dumps([e.decode("utf-8", "replace") for e in window.entries
                                                            if isinstance(e, bytes)])[:1_000_000],
            "dead_at": time.time()})
        self.counts["sessions_dead_lettered"] += 1
        log.error("session_dead_letter", consumer=self.broker.consumer_name, session=window.member,
                  claims=window.claims, dead_stream=DEAD_STREAM)

    async def _mark_through(self, member: str, turns: Turns, marks: dict[str, bytes], key: bytes | None) -> None:
        """The window's record is stored: each chain's mark moves to its last position (never back)."""
        last: dict[str, int] = {}
        for chain, seq, _ in turns.positions:
            last[chain] = max(seq, last.get(chain, 0), _mark(marks.get(chain), member, chain, key) or 0)
        await self.sessions.mark_through(member, {
            chain: f"{seq}:{'' if key is None else sign(key, through_text(member, chain, seq)).decode()}".encode()
            for chain, seq in last.items()})
