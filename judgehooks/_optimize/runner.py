"""Running a candidate instruction on cases: a deep copy of the agent (or team) answers each case,
and the evaluators grade the answer. The agent passed in is never run, changed or deployed.

The copy carries the candidate as its ``instructions``; its ``post_hooks`` are dropped (the live
evaluators would grade and store every trial run) and so is its ``db`` (trial runs are no sessions);
its models are its own (`trial.trial_copy`), so no client of judgehooks' loop lands on the caller's.
Nothing here is stored: the verdicts go back to the optimizer and into the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from .._base.context import EvalContext
from .._base.metering import current_meter
from .._base.outcome import Outcome, run_evaluator
from .._base.secrets import scrub
from .._hooks.snapshot import snapshot_run
from .cases import Case
from .spend import Spend
from .trial import close_models, trial_copy

#: longest answer or reason shown to the reflection model, in characters
MAX_SHOWN_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Verdict:
    """One evaluator's word on one answer. Its reason (an error's message included) is scrubbed of
    credentials when made: it reaches the reflection model and the result."""

    evaluator: str
    status: str  # passed, failed, error
    score: float | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.reason:
            object.__setattr__(self, "reason", scrub(self.reason))


@dataclass(frozen=True)
class CaseResult:
    """A candidate's answer to one case and its grades. ``status``: passed (every evaluator passed),
    failed (one failed), error (the agent or a judge could not answer: not a failure), or not_run
    (the spend cap was reached first). The answer and the error are scrubbed of credentials when
    made (`_base.secrets`, as every record is): a provider's error body may quote the request's
    ``Authorization`` header, and both reach the reflection model and the result."""

    case: Case
    output: str
    status: str
    verdicts: tuple[Verdict, ...] = ()
    error: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "output", scrub(self.output))
        if self.error:
            object.__setattr__(self, "error", scrub(self.error))

    @property
    def score(self) -> float:
        """What the optimizer maximises: the share of evaluators that passed the answer."""
        graded = [v for v in self.verdicts if v.status in ("passed", "failed")]
        if self.status in ("error", "not_run") and not graded:
            return 0.0
        return sum(v.status == "passed" for v in graded) / len(graded) if graded else 0.0

    def feedback(self) -> str:
        """What the reflection model reads about this answer: each evaluator's verdict and reason."""
        lines = []
        if self.error:
            lines.append(f"The run did not complete: {self.error}")
        for v in self.verdicts:
            said = f" ({v.score:g})" if v.score is not None else ""
            lines.append(f"{v.evaluator}: {v.status.upper()}{said}: {_clip(v.reason or '')}")
        if self.case.expected is not None:
            lines.append(f"A correct answer: {_clip(self.case.expected)}")
        if self.case.feedback:
            lines.append(f"What a judge said of an earlier answer: {_clip(self.case.feedback)}")
        return "\n".join(lines)

    def data(self) -> dict[str, Any]:
        return {"case": self.case.id, "status": self.status, "score": self.score, "output": self.output,
                "verdicts": [dataclasses.asdict(v) for v in self.verdicts], "error": self.error}


def _clip(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + " [...]"


def instructions_of(agent: Any) -> str:
    """The agent's instructions as one text (the seed candidate)."""
    value = getattr(agent, "instructions", None)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise TypeError(f"optimize rewrites text instructions; this agent's instructions are a "
                    f"{type(value).__name__} (a function or other object)")


def check_agent(agent: Any) -> None:
    if not callable(getattr(agent, "deep_copy", None)) or not callable(getattr(agent, "arun", None)):
        raise TypeError(f"optimize takes an agno Agent or Team, got {type(agent).__name__}")
    instructions_of(agent)


@dataclass
class Runner:
    """Runs candidates on cases for the optimizer, at most `concurrency` cases at once."""

    agent: Any
    evaluators: Sequence[Any]
    spend: Spend
    concurrency: int = 4
    progress: Callable[[int], None] | None = None
    needs_tools: bool = field(init=False)

    def __post_init__(self) -> None:
        self.needs_tools = any(getattr(ev, "needs_tools", True) for ev in self.evaluators)

    async def run(self, cases: Sequence[Case], instructions: str) -> list[CaseResult]:
        results: list[CaseResult | None] = [None] * len(cases)
        limit = anyio.CapacityLimiter(self.concurrency)

        async def one(i: int) -> None:
            async with limit:
                results[i] = await self.run_case(cases[i], instructions)
            if self.progress is not None:
                self.progress(1)

        async with anyio.create_task_group() as tg:
            for i in range(len(cases)):
                tg.start_soon(one, i)
        return [r for r in results if r is not None]

    async def run_case(self, case: Case, instructions: str) -> CaseResult:
        if not self.spend.admit("agent"):
            return CaseResult(case, "", "not_run", error=self.spend.refusal())
        copy, models = trial_copy(self.agent, instructions)
        try:
            output = await copy.arun(case.input, stream=False)
        except Exception as exc:  # the agent's failure on this case: a zero for the optimizer, said why
            self.spend.charge(None)
            return CaseResult(case, "", "error", error=f"{type(exc).__name__}: {_clip(str(exc))}")
        finally:
            await close_models(models)
        metrics = getattr(output, "metrics", None)
        cost = getattr(metrics, "cost", None)
        self.spend.charge(cost if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None)
        ctx = snapshot_run(output, agent=copy, with_tools=self.needs_tools)
        ctx = dataclasses.replace(ctx, expected=case.expected if case.expected is not None else ctx.expected,
                                  metadata={**case.metadata, **ctx.metadata})
        status = str(getattr(output, "status", "") or "").lower()
        if "error" in status:
            return CaseResult(case, ctx.output, "error", error=f"the run ended with status error: {_clip(ctx.output)}")
        verdicts = tuple([await self._grade(ev, ctx) for ev in self.evaluators])
        return CaseResult(case, ctx.output, _status(verdicts), verdicts)

    async def _grade(self, evaluator: Any, ctx: EvalContext) -> Verdict:
        token = current_meter.set(self.spend)  # every judge attempt is counted against the optimization's caps
        try:
            outcome: Outcome = await run_evaluator(evaluator, ctx)
        finally:
            current_meter.reset(token)
        name = getattr(evaluator, "evaluator_name", type(evaluator).__name__)
        if outcome.status == "error":
            error = outcome.error
            return Verdict(name, "error", reason=f"{type(error).__name__}: {error}" if error else "error")
        return Verdict(name, outcome.status, outcome.score, outcome.reason)


def _status(verdicts: Sequence[Verdict]) -> str:
    """failed when any evaluator failed the answer; else error when one could not grade it."""
    if any(v.status == "failed" for v in verdicts):
        return "failed"
    return "error" if any(v.status == "error" for v in verdicts) else "passed"
