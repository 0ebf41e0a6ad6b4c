"""SessionJudge: an LLM judge of whole conversations, graded once a session goes quiet.

In `post_hooks` it records every run as a turn of its session (durably, in the outbox file) and
grades the session's turns together, once, `idle_after` seconds after the last run, or at once on
`judgehooks.end_session(session_id)`. The judge call is `AgentAsJudgeEval`'s (retries, timeout,
verdict reading); the question is the whole transcript, clipped to `transcript_budget` when it is too long.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any, Literal

from .._base.context import EvalContext
from .._base.outcome import Outcome
from .._base.record import EvalRecord
from .._base.session import SessionContext, Turn
from .._base.validate import check_choice, check_number
from .._hooks.redaction import redact_turn
from .._hooks.session import SessionShell
from .._hooks.settings import HookSettings
from .._judges.litellm import LiteLLMJudge
from .._judges.process import ProcessJudge
from .._judges.prompt import session_refs
from .._judges.transcript import BudgetUnit, SessionCall, plan
from ..exceptions import StoreError
from .base import Evaluator
from .fields import stable_name
from .llm import JudgeConnection, check_grading, guidelines_tuple
from .version import judge_inputs, session_prompt_text


@dataclass(eq=False)
class SessionJudge(Evaluator, JudgeConnection):
    """Grade whole agno sessions (every turn of a conversation, in order) with an LLM judge.

    Put it in an Agent's or Team's ``post_hooks``. Each run is recorded as a turn; ``idle_after``
    seconds after a session's last run, its turns are graded together, once, into one record with
    ``scope="session"``, the session's ``session_id`` and the ``run_ids`` it covered, in order. A
    run after that starts a new window, graded the same way. ``judgehooks.end_session(id)`` grades
    a session at once. Judge, store, callback, background and sampling settings are
    `AgentAsJudgeEval`'s; sampling is decided once per session. There is no gate: once a
    conversation has ended there is nothing left to block.

    ``transcript_budget`` (``transcript_unit`` "chars", or "tokens" estimated at four characters
    each) holds for the judge's whole prompt, tool calls and member runs included: a longer
    transcript keeps the first turn and the last ``keep_last`` turns with a marked gap, its texts
    are shortened to fit (each cut marked, and stated in the prompt), and the record's
    ``details["transcript"]`` and ``details["prompt"]`` say what was cut.
    """

    criteria: str
    _: KW_ONLY
    scoring_strategy: Literal["numeric", "binary"] = "binary"
    threshold: float = 7
    additional_guidelines: str | Sequence[str] | None = None
    idle_after: float = 300.0
    transcript_budget: int | None = 100_000
    transcript_unit: BudgetUnit = "chars"
    keep_last: int = 8

    scale = 10.0
    shell_type = SessionShell

    def __post_init__(self) -> None:
        check_grading(self.criteria, self.scoring_strategy, self.threshold)
        if session_refs(self.criteria, *guidelines_tuple(self.additional_guidelines)):
            raise ValueError("a SessionJudge's criteria cannot name {session_state[...]}: it grades a whole "
                             "conversation, whose runs may each have another session_state; name it in a "
                             "run-level AgentAsJudgeEval, whose run has one")
        check_number("idle_after", self.idle_after, minimum=0, allow_equal=False)
        if self.transcript_budget is not None:
            check_number("transcript_budget", self.transcript_budget, minimum=1, allow_equal=True, integer=True)
        check_choice("transcript_unit", self.transcript_unit, ("chars", "tokens"))
        check_number("keep_last", self.keep_last, minimum=1, allow_equal=True, integer=True)
        self.check_connection()
        self.mode = self.scoring_strategy  # type: ignore[misc]  # ClassVar set per instance
        self.needs_tools = self.include_tool_calls  # type: ignore[misc]  # ClassVar set per instance

    def _prepare(self, settings: HookSettings) -> None:
        """The judge, once the deployment is known (in a helper process with run_in_background)."""
        if settings.gate:
            raise ValueError("gate=True: a SessionJudge grades a conversation after it has ended, when there is no "
                             "run left to block; gate single runs with AgentAsJudgeEval(gate=True)")
        if settings.outbox is False:
            raise ValueError("outbox=False: a SessionJudge keeps each session's turns in the outbox file until "
                             "the session is graded; give it a path, or leave it None (beside the store)")
        self.judge = self.connect(settings)
        self._call = SessionCall(
            judge=self.judge, criteria=self.criteria, mode=self.scoring_strategy, threshold=self.pass_threshold,
            guidelines=guidelines_tuple(self.additional_guidelines), include_tools=self.include_tool_calls,
            timeout=self.timeout, retry=self.retry, label=self.name or self.default_name(),
            first_errors=self.first_errors)

    @property
    def lease(self) -> float:
        """How long a process holds a session it grades before another may take it over: longer
        than one grading can take (every attempt's timeout and backoff), and at least two minutes."""
        attempts = self.retries + 1
        return max(120.0, attempts * self.timeout + attempts * self.retry.max_backoff + 60.0)

    @property
    def pass_threshold(self) -> float | None:
        return self.threshold if self.scoring_strategy == "numeric" else None

    def default_name(self) -> str:
        return stable_name("session_judge", [self.criteria, self.scoring_strategy, self.pass_threshold])

    def version_inputs(self) -> dict[str, Any]:
        """The own settings, the session prompt and the judge's model: another model's verdicts are
        another version's (`grade-sessions --model` grades again)."""
        return {**super().version_inputs(), **judge_inputs([self._call], session_prompt_text)}

    def record_metadata(self) -> Mapping[str, Any]:
        found: dict[str, Any] = {"criteria": self.criteria, "idle_after": self.idle_after}
        if self.additional_guidelines is not None:
            found["additional_guidelines"] = self.additional_guidelines
        return found

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        """Ask the judge about the whole conversation (a single run offline is a one-turn one)."""
        turns = ctx.turns if isinstance(ctx, SessionContext) and ctx.turns else (Turn(ctx),)
        transcript = plan(turns, budget=self.transcript_budget, unit=self.transcript_unit, keep_last=self.keep_last,
                          include_tools=self.include_tool_calls)
        outcome = await replace(self._call, transcript=transcript).ask(ctx)
        said = transcript.details()
        if "prompt" in outcome.details:  # texts were cut to the budget too (details["prompt"] says how much)
            said["clipped"] = True
        return replace(outcome, details={**outcome.details, "transcript": said})

    async def grade_session(self, session_id: str, turns: Sequence[Turn]) -> tuple[EvalRecord, StoreError | None]:
        """Grade a whole session given as turns (e.g. read from an agno db) and deliver its record
        (store, callbacks, log); the error when the store could not take it."""
        shell = self._shell
        assert isinstance(shell, SessionShell)
        redact = shell.settings.redact
        if redact is not None:  # turns the caller built (read_sessions redacts its own): as the hook's are
            turns = [t if t.run.redacted_by is not None else redact_turn(t, redact) for t in turns]
        record = await shell.grader.grade_turns(session_id, list(turns))
        return record, await shell.wiring.pipeline.deliver([record])

    def settings(self) -> dict[str, Any] | None:
        """Rebuildable in another process (`judgehooks resume`) only with a litellm model string;
        no secrets travel."""
        if not isinstance(self.judge, (LiteLLMJudge, ProcessJudge)):
            return None
        guidelines = self.additional_guidelines
        return {"criteria": self.criteria, "scoring_strategy": self.scoring_strategy, "threshold": self.threshold,
                "additional_guidelines": list(guidelines_tuple(guidelines)) or None, "idle_after": self.idle_after,
                "transcript_budget": self.transcript_budget, "transcript_unit": self.transcript_unit,
                "keep_last": self.keep_last,
                "model": self.judge.model, "api_base": self.api_base, "timeout": self.timeout,
                "retries": self.retries, "retry_backoff": self.retry_backoff, "temperature": self.temperature,
                "structured_output": self.structured_output, "include_tool_calls": self.include_tool_calls}

    def __repr__(self) -> str:
        return f"SessionJudge(name={self.evaluator_name!r}, idle_after={self.idle_after!r})"
