"""Quality gates: a failed verdict blocks the answer, optionally after re-running the agent to repair it.

A gate works inline only: it must have the verdict before agno hands the run back. On a failed
verdict it replaces the run's content with a fallback message and raises agno's `OutputCheckError`,
so the run's status is `error` (agno itself replaces the content only when it is None, so without
this the rejected answer would still reach the caller).

Repair (``repair=k``) first re-runs the agent or team up to k times with the judge's reason as
guidance. Each attempt is a separate agno run in the same session, graded into its own record whose
metadata names the attempt and the original run; the first attempt that is not failed supplies the
content the caller sees. A ContextVar keeps the re-run's own post hook from grading or repairing it
again (the repair loop grades it).

Streaming: text already streamed cannot be taken back. A blocked stream ends with agno's
`RunErrorEvent` whose content is the fallback, and no `RunCompletedEvent`; a repaired stream ends
with a `RunCompletedEvent` (and run output) carrying the repaired answer after the rejected text.

A judge error is never a failure, but a gate that has no verdict must not hand the answer over
unchecked: with ``gate_on_error="block"`` (the default: a gate is a safety control, so it fails
closed) an `error` record shows the fallback like a failed one, without repair attempts (there is no
reason to repair with); ``"allow"`` lets the answer through (fails open, as every gate did before
this setting existed).

A `skipped` record is no verdict either: a spend cap reached (reason "budget") or a queue that shed
the job. If it passed the gate, anyone who can flood requests could use up `max_calls` and have every
later answer delivered unchecked for the rest of the window. So ``gate_on_skip="block"`` (the
default) treats it like an error; ``"allow"`` delivers the answer. `Gate.decide` is the one verdict
policy: the original verdict and every repair attempt's go through it.

A latency budget (``gate_latency_s``): a gate that has no verdict on the run by then stops waiting.
The grading is cancelled before anything is stored, and the one record stored is a `skipped` one
whose reason is "gate_latency" and whose details say the gate decided by its policy
(``gate_on_timeout``, "block" by default), not by a verdict. Repair attempts have no budget.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import anyio.to_thread

from .._base.context import EvalContext, render_content
from .._base.log import log
from .._base.record import EvalRecord
from .._runtime import runtime
from .resumed import is_paused

DEFAULT_FALLBACK = "Sorry, I can't give a reliable answer to that right now. Please try again or rephrase."
GATE_ON_ERROR = ("block", "allow")
Decision = Literal["pass", "fail", "block"]
#: a skipped record's reason when the gate's latency budget ran out
GATE_LATENCY = "gate_latency"

REPAIR_PROMPT = ("{input}\n\nA reviewer rejected the previous answer to this request, for this reason: {reason}\n"
                 "Answer the request again, fixing that.")

# (gate id, agent/team id) pairs whose repair loop is running in this context: their re-runs'
# own post hooks step aside. Keyed by owner so a team's re-run still grades its members.
_REPAIRING: ContextVar[frozenset[tuple[int, int]]] = ContextVar("judgehooks_repairing", default=frozenset())

Grade = Callable[[EvalContext], Coroutine[Any, Any, EvalRecord | None]]
Snapshot = Callable[[Any], EvalContext]


@dataclass(frozen=True, slots=True)
class Gate:
    """A gate's settings: the message shown instead of a failed answer, and repair attempts."""

    fallback: str = DEFAULT_FALLBACK
    repair: int = 0
    on_error: str = "block"
    on_skip: str = "block"
    latency_s: float | None = None
    on_timeout: str = "block"

    @classmethod
    def configure(cls, *, gate: bool, fallback: str, repair: int, run_in_background: bool,
                  on_error: str = "block", on_skip: str = "block", latency_s: float | None = None,
                  on_timeout: str = "block") -> Gate | None:
        """The gate of settings each checked already (`HookSettings`); None when neither gate nor
        repair is asked for. A gate needs the verdict before the run returns: inline grading only."""
        if not gate and repair == 0:
            return None
        if run_in_background:
            raise ValueError("gate=True and repair=N need the verdict before the run returns, so they work inline "
                             "only: use them with run_in_background=False")
        return cls(fallback=fallback, repair=repair, on_error=on_error, on_skip=on_skip, latency_s=latency_s,
                   on_timeout=on_timeout)

    def stands_aside(self, owner: Any) -> bool:
        """True inside this gate's own re-run of `owner`: the repair loop grades that run itself."""
        return (id(self), id(owner)) in _REPAIRING.get()

    def decide(self, record: EvalRecord | None) -> Decision:
        """The one verdict policy: "pass" delivers the answer, "fail" repairs then blocks, "block"
        blocks at once. Only `passed` is a verdict for the answer; no verdict (an `error`, no record,
        or a `skipped` one: a spend cap reached, a shed job) blocks unless its setting says "allow"."""
        if record is None or record.status == "error":
            return "pass" if self.on_error == "allow" else "block"
        if record.status == "skipped" and record.reason == GATE_LATENCY:
            return "pass" if self.on_timeout == "allow" else "block"
        if record.status == "skipped":
            return "pass" if self.on_skip == "allow" else "block"
        return "fail" if record.status == "failed" else "pass"

    async def enforce(self, record: EvalRecord | None, run_output: Any, owner: Any, snapshot: Snapshot,
                      grade: Grade, on_loop: bool) -> None:
        """After the verdict, as `decide` says: pass the answer; on "fail" try repairs, then block;
        on "block" show the fallback at once (there is no reason to repair with).

        `on_loop` says we run on the judgehooks loop (the sync hook): re-run with `owner.run` on a
        worker thread and grade directly. Otherwise we run on the caller's loop (the async hook):
        re-run with `owner.arun` and grade on the judgehooks loop."""
        decision = self.decide(record)
        if decision == "block":
            self.block(run_output, record, record)
        if decision != "fail":
            return
        assert record is not None  # "fail" is a failed record
        last = record
        if self.repair:
            token = _REPAIRING.set(_REPAIRING.get() | {(id(self), id(owner))})
            try:
                for attempt in range(1, self.repair + 1):
                    outcome = await self._attempt(record, last, attempt, run_output, owner, snapshot, grade, on_loop)
                    if outcome is None:
                        break
                    last, content = outcome
                    if self.decide(last) == "pass":
                        _show(run_output, content)
                        log.info("gate_repaired", evaluator=record.evaluator, run_id=record.run_id,
                                 attempt=attempt, attempt_run_id=last.run_id, status=last.status)
                        return
            finally:
                _REPAIRING.reset(token)
        self.block(run_output, record, last)

    async def _attempt(self, original: EvalRecord, last: EvalRecord, attempt: int, run_output: Any, owner: Any,
                       snapshot: Snapshot, grade: Grade, on_loop: bool) -> tuple[EvalRecord, Any] | None:
        """One re-run with the last reason as guidance, graded; None if the re-run itself failed."""
        prompt = REPAIR_PROMPT.format(input=original.input, reason=last.reason or "it did not meet the criteria")
        metadata = {**(getattr(run_output, "metadata", None) or {}), "judgehooks_repair_of": original.run_id,
                    "judgehooks_repair_attempt": attempt, "judgehooks_evaluator": original.evaluator}
        kwargs = {"session_id": original.session_id, "user_id": original.user_id, "metadata": metadata,
                  "stream": False}
        try:
            if on_loop:
                output = await anyio.to_thread.run_sync(partial(owner.run, prompt, **kwargs))
            else:
                output = await owner.arun(prompt, **kwargs)
        except Exception as exc:
            log.warning("repair_run_failed", evaluator=original.evaluator, run_id=original.run_id, attempt=attempt,
                        error_type=type(exc).__name__, error=str(exc))
            return None
        from agno.run.base import RunStatus

        if getattr(output, "status", None) == RunStatus.error or output.content is None:
            log.warning("repair_run_failed", evaluator=original.evaluator, run_id=original.run_id, attempt=attempt,
                        error_type="RunError", error=str(output.content))
            return None
        if is_paused(output):  # it waits for a person again (a tool to confirm): no answer to show
            log.warning("repair_run_paused", evaluator=original.evaluator, run_id=original.run_id, attempt=attempt,
                        attempt_run_id=getattr(output, "run_id", None))
            return None
        ctx = snapshot(output)
        if on_loop:
            attempt_record = await grade(ctx)
        else:
            attempt_record = await runtime.wait(runtime.submit(grade, ctx))
        return (attempt_record, output.content) if attempt_record is not None else None

    def block(self, run_output: Any, record: EvalRecord | None, last: EvalRecord | None) -> None:
        """Show the fallback instead of the failed (or unjudged) answer and make agno end the run as an error."""
        from agno.exceptions import OutputCheckError

        _show(run_output, self.fallback)
        status = last.status if last is not None else "error"
        details = {"evaluator": getattr(record, "evaluator", None), "record_id": getattr(last, "id", None),
                   "run_id": getattr(record, "run_id", getattr(run_output, "run_id", None)), "status": status,
                   "score": getattr(last, "score", None), "reason": getattr(last, "reason", None),
                   "error_type": getattr(last, "error_type", None),
                   "repair_attempts": self.repair if status == "failed" else 0}
        log.info("gate_blocked", **{k: v for k, v in details.items() if k != "repair_attempts"},
                 repairs=details["repair_attempts"])
        raise OutputCheckError(self.fallback, additional_data=details)


def _show(run_output: Any, content: Any) -> None:
    """Make `content` what the caller gets and what the session remembers the assistant said: the run's
    content and its last assistant message (history sent to the model on later turns)."""
    run_output.content = content
    for message in reversed(getattr(run_output, "messages", None) or ()):
        if getattr(message, "role", None) == "assistant":
            message.content = render_content(content)
            return
