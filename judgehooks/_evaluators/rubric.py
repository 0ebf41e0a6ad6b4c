"""Rubric: several weighted criteria graded by an LLM judge in one evaluator.

Each criterion is its own judge call (concurrently), with the same prompt, strict verdict schema,
parser and retries as `AgentAsJudgeEval`: criteria cannot anchor each other's scores, a reply
that cannot be read is retried for that criterion alone, and no second verdict format exists to
get wrong. The price is one call per criterion. Each criterion's score and reason are stored in
``details["criteria"]``; the record's score is their weighted mean (1-10).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, asdict, dataclass
from typing import Any

from .._base.context import EvalContext
from .._base.outcome import Outcome, add_usage
from .._base.validate import check_number
from .._hooks.settings import HookSettings
from .._judges.call import JudgeCall
from .._judges.litellm import LiteLLMJudge
from .._judges.process import ProcessJudge
from .base import Evaluator
from .combine import assess_calls, member_error
from .fields import stable_name
from .llm import JudgeConnection
from .version import judge_inputs


@dataclass(frozen=True)
class Criterion:
    """One rubric line: what is judged, its weight, and optionally a floor the criterion's own
    score must reach (1-10) whatever the weighted score."""

    name: str
    description: str
    weight: float = 1.0
    min_score: int | None = None

    def __post_init__(self) -> None:
        for what in ("name", "description"):
            value = getattr(self, what)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"Criterion {what} must be a non-empty string, got {value!r}")
        check_number(f"weight of criterion {self.name!r}", self.weight, minimum=0, allow_equal=False)
        if self.min_score is not None and (isinstance(self.min_score, bool) or not isinstance(self.min_score, int)
                                           or not 1 <= self.min_score <= 10):
            raise ValueError(f"min_score of criterion {self.name!r} must be an integer from 1 to 10, "
                             f"got {self.min_score!r}")


def _criteria(value: Any) -> tuple[Criterion, ...]:
    if isinstance(value, Mapping):
        value = [Criterion(name, text) for name, text in value.items()]
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError("criteria must be a non-empty list of Criterion (or dicts with name, description, "
                         "weight, min_score), or a mapping name -> description")
    items = []
    for i, item in enumerate(value):
        if isinstance(item, Mapping):
            try:
                item = Criterion(**item)
            except TypeError as exc:
                raise ValueError(f"criteria[{i}]: {exc}") from None
        if not isinstance(item, Criterion):
            raise TypeError(f"criteria[{i}] must be a Criterion or a dict, got {type(item).__name__}")
        items.append(item)
    names = [c.name for c in items]
    if len(set(names)) != len(names):
        raise ValueError(f"criteria names must be distinct, got {names}")
    return tuple(items)


@dataclass(eq=False)
class Rubric(Evaluator, JudgeConnection):
    """Weighted criteria, one LLM-judge call each. Passes when the weighted score reaches
    ``threshold`` (1-10) and no criterion is under its ``min_score``. Judge settings are
    `AgentAsJudgeEval`'s (model, api_base, api_key, judge, timeout, retries, ...)."""

    criteria: Sequence[Criterion | Mapping[str, Any]] | Mapping[str, str]
    _: KW_ONLY
    threshold: int = 7

    mode = "numeric"
    scale = 10.0

    def __post_init__(self) -> None:
        # the field keeps what users may pass (dicts, a mapping); the code reads the checked tuple
        self._criteria = self.criteria = _criteria(self.criteria)
        threshold = self.threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= 10:
            raise ValueError(f"threshold must be an integer from 1 to 10, got {threshold!r}")
        self.check_connection()
        self.needs_tools = self.include_tool_calls  # type: ignore[misc]  # ClassVar set per instance

    def _prepare(self, settings: HookSettings) -> None:
        """The judge and one judge call per criterion, now that the deployment is known."""
        self.judge = self.connect(settings)
        retry = self.retry
        self._calls = tuple(
            JudgeCall(judge=self.judge, criteria=f"{c.name}: {c.description}", mode="numeric",
                      threshold=c.min_score or self.threshold, include_tools=self.include_tool_calls,
                      timeout=self.timeout, retry=retry, label=self.name or "rubric", first_errors=self.first_errors)
            for c in self._criteria)

    def settings(self) -> dict[str, Any] | None:
        """Rebuildable in another process only with a litellm model string (no secrets travel)."""
        if not isinstance(self.judge, (LiteLLMJudge, ProcessJudge)):
            return None
        return {"criteria": [asdict(c) for c in self._criteria], "model": self.judge.model,
                "api_base": self.api_base, "timeout": self.timeout, "retries": self.retries,
                "retry_backoff": self.retry_backoff, "temperature": self.temperature,
                "structured_output": self.structured_output, "include_tool_calls": self.include_tool_calls}

    def default_name(self) -> str:
        return stable_name("rubric", [[asdict(c) for c in self._criteria], self.pass_threshold])

    def version_inputs(self) -> dict[str, Any]:
        return {**super().version_inputs(), **judge_inputs(self._calls)}

    def record_metadata(self) -> Mapping[str, Any]:
        return {"criteria": "; ".join(f"{c.name} (x{c.weight:g})" for c in self._criteria)}

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        outcomes = await assess_calls([call.ask for call in self._calls], ctx)
        lines = [o.summary(c.name, weight=c.weight, min_score=c.min_score)
                 for c, o in zip(self._criteria, outcomes, strict=True)]
        details: dict[str, Any] = {"criteria": lines}
        state = {k: v for o in outcomes for k, v in (o.details or {}).get("session_state", {}).items()}
        if state:  # what the criteria naming {session_state[key]} were given, as an AgentAsJudgeEval's record says
            details["session_state"] = state
        usage = add_usage(outcomes)
        errors = [(c.name, o) for c, o in zip(self._criteria, outcomes, strict=True) if o.status == "error"]
        if errors:
            return Outcome(error=member_error("criterion", errors), details=details, **usage)
        total = sum(c.weight for c in self._criteria)
        score = round(sum(c.weight * (o.score or 0) for c, o in zip(self._criteria, outcomes, strict=True)) / total, 4)
        below = [c.name for c, o in zip(self._criteria, outcomes, strict=True)
                 if c.min_score is not None and (o.score or 0) < c.min_score]
        assert self.pass_threshold is not None
        passed = score >= self.pass_threshold and not below
        reason = f"weighted score {score:g} {'>=' if score >= self.pass_threshold else '<'} {self.pass_threshold:g}"
        if below:
            reason += f"; under their minimum: {below}"
        return Outcome(passed=passed, score=score, reason=reason, details=details, **usage)
