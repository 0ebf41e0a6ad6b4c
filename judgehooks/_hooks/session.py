"""The hook shell of a session evaluator: record each run as a turn of its session, never grade here.

On the hook path a session evaluator takes the admission path's first steps as every evaluator
does (`HookShell.admit`): it snapshots the run (a team run with its members' runs, in order, with
the run's trace ids), redacts it, and samples it by its session (the same answer for every run of
a session, in every process). Then it writes the turn to the session book in one short SQLite
transaction and (re)arms the session's due time `idle_after` seconds ahead. The grading happens
later, on the judgehooks loop (`judgehooks._grading.sessions`), so the run never waits for a judge.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
from collections.abc import Mapping
from typing import Any, Protocol

from .._base.context import EvalContext, render_content
from .._base.log import log
from .._base.session import Member, Turn
from .._base.text import storable
from .._grading.pipeline import Graded
from .._grading.sessionbook import SessionBook, TurnTooLarge
from .._grading.sessions import SessionGrader
from ..stores._sqlite import outbox_path_for
from .redaction import Redactor, redact_turn
from .settings import HookSettings, Wiring
from .shell import HookShell
from .snapshot import snapshot_run


def member_of(output: Any) -> Member:
    """One member run as the transcript shows it: who, what it was asked, what it answered."""
    run_input = getattr(output, "input", None)
    name = getattr(output, "agent_name", None) or getattr(output, "team_name", None) \
        or getattr(output, "agent_id", None) or getattr(output, "team_id", None)
    return Member(name=None if name is None else storable(str(name)),
                  input=storable(run_input.input_content_string()) if run_input is not None else "",
                  output=render_content(getattr(output, "content", None)))


def members(run_output: Any) -> tuple[Member, ...]:
    """A team run's member runs in the order they ran (a nested team's members after it)."""
    found: list[Member] = []

    def collect(output: Any) -> None:
        for member in getattr(output, "member_responses", None) or ():
            found.append(member_of(member))
            collect(member)

    collect(run_output)
    return tuple(found)


def snapshot_turn(run_output: Any, *, redact: Redactor | None, agent: Any = None, team: Any = None,
                  user_id: str | None = None, metadata: Mapping[str, Any] | None = None, with_tools: bool = False,
                  team_members: tuple[Member, ...] | None = None,
                  trace: tuple[str | None, str | None] = (None, None)) -> Turn:
    """The one snapshot of a session turn, for every session path (the hook, the Redis relay that
    forwards the book's turns, `grade-sessions`): the run and its members' runs, redacted together
    by `redact` before the session book, Redis, the judge or a store sees them. `team_members`:
    the member runs when they are not in the run (an agno db stores them apart); `trace`: the run's
    OpenTelemetry ids (the session record's event links to its last turn's run)."""
    turn = Turn(snapshot_run(run_output, agent=agent, team=team, user_id=user_id, metadata=metadata,
                             with_tools=with_tools, trace=trace),
                members(run_output) if team_members is None else team_members)
    return turn if redact is None else redact_turn(turn, redact)


class Idle(Graded, Protocol):
    """A session evaluator: a graded evaluator with an idle time."""

    @property
    def idle_after(self) -> float: ...

    @property
    def lease(self) -> float: ...


class SessionShell(HookShell):
    """A `HookShell` whose hooks record turns; its wiring adds the session book and grader."""

    grader: SessionGrader
    book: SessionBook
    evaluator: Idle

    def __init__(self, evaluator: Idle, settings: HookSettings, *, needs_tools: bool,
                 spec: Mapping[str, Any] | None) -> None:
        super().__init__(evaluator, settings, needs_tools=needs_tools, spec=spec)
        self.wiring  # noqa: B018 - start the clock now: it grades what a dead process left due

    def _build(self) -> Wiring:
        # Never a background dispatcher: a session is graded by its clock, off the hook path already.
        # run_in_background still chose the judge (a helper process) when the evaluator was prepared.
        # With broker= the turns go on to Redis (forwarded from the book), where workers grade them.
        settings, broker = self.settings, self.settings.broker
        if broker is not None:
            settings = settings.replace("broker", None)
        if settings.run_in_background:
            settings = settings.replace("run_in_background", False)
        wiring = settings.build(self.evaluator, sampler=self.sampler, spec=self._spec)
        path = settings.outbox if isinstance(settings.outbox, (str, os.PathLike)) else outbox_path_for(wiring.store)
        self.book = SessionBook(path, lease=self.evaluator.lease, max_bytes=settings.max_queue_bytes)
        relay = None
        if broker is not None:
            from .._grading.redis.sessions import SessionRelay

            relay = SessionRelay(broker, idle_after=self.evaluator.idle_after)
        self.grader = SessionGrader(wiring.pipeline, self.book, idle_after=self.evaluator.idle_after,
                                    max_concurrency=settings.max_concurrency, relay=relay)
        self._spec_text = self._book_spec()
        self.grader.start()
        return wiring

    def respec(self, spec: Mapping[str, Any] | None) -> None:
        super().respec(spec)
        self._spec_text = self._book_spec()

    def _book_spec(self) -> str | None:
        """The spec stored with each turn; marked when the turns are Redis workers' to grade, so that
        `judgehooks resume` never grades a broker producer's unforwarded turns as a partial window."""
        if self._spec is None:
            return None
        relayed = getattr(getattr(self, "grader", None), "relay", None) is not None
        return json.dumps({**self._spec, "relay": True} if relayed else self._spec)

    def take(self, run_output: Any, *, agent: Any, team: Any, user_id: str | None,
             metadata: Mapping[str, Any] | None, trace: tuple[str | None, str | None],
             session_state: Any = None) -> Turn:
        """Snapshot and redact a turn: the run and its members' runs, redacted together (without the
        run's session_state: a SessionJudge reads none, and the session book keeps every turn)."""
        return snapshot_turn(run_output, agent=agent, team=team, user_id=user_id, metadata=metadata,
                             with_tools=self.needs_tools, redact=self.settings.redact, trace=trace)

    def sampled_as(self, taken: Turn) -> EvalContext:
        """Sampling decides on the session, not the run: a sampled session has every turn, the others none."""
        ctx = taken.run
        return dataclasses.replace(ctx, run_id=ctx.session_id or ctx.run_id or "")

    def record_turn(self, turn_snapshot: Turn, rate: float) -> None:
        """After admission: write the turn to the session book and arm the session's due time."""
        ctx = turn_snapshot.run
        session_id = ctx.session_id or ctx.run_id or ""
        wiring, grader = self.wiring, self.grader
        now = time.time()
        # With a relay the book only holds turns until Redis has them: due (to be forwarded) at once;
        # the session's own due time, `idle_after` after its last run, is kept in Redis.
        due = now if grader.relay is not None else now + self.evaluator.idle_after
        try:
            turn = {**turn_snapshot.as_dict(), "at": now}
            armed = self.book.add_turn(wiring.pipeline.name, session_id, ctx.run_id or "", turn, due_at=due,
                                       sample_rate=rate, spec=self._spec_text)
        except TurnTooLarge as exc:  # past max_queue_bytes: shed as a background queue sheds such a job
            log.warning("session_turn_lost", evaluator=wiring.pipeline.name, session_id=session_id,
                        run_id=ctx.run_id, size=exc.size, max_queue_bytes=exc.limit, error=str(exc))
            grader.lost(ctx, rate, str(exc))
            return
        except sqlite3.Error as exc:
            # Nothing to grade it with later (a full disk, a locked file): said loudly, and the run
            # gets a `skipped` record (stored, on_drop, stats["turns_lost"]), never only a log line.
            log.error("session_turn_lost", evaluator=wiring.pipeline.name, session_id=session_id, run_id=ctx.run_id,
                      error_type=type(exc).__name__, error=str(exc), outbox=self.book.path)
            grader.lost(ctx, rate, f"the outbox file {self.book.path} refused it: {type(exc).__name__}: {exc}")
            return
        grader.count("turns")
        grader.arm(due if armed is None else armed)  # now, when its turns reached the byte budget

    def post_check(self, run_output: Any, agent: Any, team: Any, user_id: str | None,
                   metadata: Mapping[str, Any] | None, run_context: Any = None) -> None:
        if (admitted := self.admit(run_output, agent, team, user_id, metadata, run_context)) is not None:
            self.record_turn(*admitted[:2])

    async def async_post_check(self, run_output: Any, agent: Any, team: Any, user_id: str | None,
                               metadata: Mapping[str, Any] | None, run_context: Any = None) -> None:
        if (admitted := self.admit(run_output, agent, team, user_id, metadata, run_context)) is not None:
            self.record_turn(*admitted[:2])

    async def ascore(self, run_output: Any, expected: Any) -> Any:
        raise TypeError(f"{type(self.evaluator).__name__} grades whole conversations, not one run, so it is no "
                        "agno Scorer: put it in post_hooks (agno's suite runner runs hooks too) or use a run "
                        "evaluator as the Case's scorer")

    def stats(self) -> dict[str, Any]:
        counts = self.sampler.counts
        return {**self.grader.stats(), "sampled_out": counts.sampled_out, "filtered_out": counts.filtered_out}
