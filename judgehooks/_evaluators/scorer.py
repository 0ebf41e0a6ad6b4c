"""ScorerEval: agno's own `agno.scorer.Scorer` objects (CodeScorer, ToolCallScorer, JudgeScorer,
or any object with ``async ascore(run, expected)``) as judgehooks evaluators.

A scorer reads an agno run object; evaluators read the frozen snapshot (so background and resumed
grading work). The scorer gets a `RunOutput` rebuilt from the snapshot: content is the rendered
output text (JSON for structured output), tools are every tool call of the run with its members'.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

from .._base.context import EvalContext
from .._base.outcome import Outcome
from .base import Evaluator


def run_output_for(ctx: EvalContext) -> Any:
    """An agno RunOutput carrying what the snapshot holds, for code written against agno's run."""
    from agno.metrics import RunMetrics
    from agno.models.response import ToolExecution
    from agno.run.agent import RunOutput

    usage = ctx.usage
    metrics = RunMetrics()
    if usage is not None:
        metrics.input_tokens = usage.input_tokens or 0
        metrics.output_tokens = usage.output_tokens or 0
        metrics.total_tokens = usage.total_tokens or 0
        metrics.cost = usage.cost_usd
        metrics.duration = None if usage.latency_ms is None else usage.latency_ms / 1000
    tools = [ToolExecution(tool_name=c.name, tool_args=dict(c.arguments or {}), result=c.result,
                           tool_call_error=c.error) for c in ctx.tool_calls]
    return RunOutput(run_id=ctx.run_id, agent_id=ctx.agent_id, agent_name=ctx.agent_name, session_id=ctx.session_id,
                     user_id=ctx.user_id, content=ctx.output, tools=tools, metrics=metrics,
                     metadata=dict(ctx.metadata))


@dataclass(eq=False)
class ScorerEval(Evaluator):
    """Grade with an agno Scorer: its ``Score(value in [0, 1], passed, reason, detail)`` becomes
    the record's score, status, reason and details. ``expected`` (or the run's expected value) is
    passed to the scorer. Built from user objects: `judgehooks resume` needs ``--import``."""

    scorer: Any
    _: KW_ONLY
    expected: Any = None

    mode = "numeric"

    def __post_init__(self) -> None:
        if not callable(getattr(self.scorer, "ascore", None)):
            raise TypeError(f"scorer must be an agno Scorer (an object with async ascore(run, expected)), "
                            f"got {type(self.scorer).__name__}")

    def default_name(self) -> str:
        return f"scorer-{type(self.scorer).__name__}"

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        expected = self.expected if self.expected is not None else ctx.expected
        score = await self.scorer.ascore(run_output_for(ctx), expected)
        return Outcome(passed=bool(score.passed), score=float(score.value), reason=score.reason,
                       details=dict(score.detail or {}))
