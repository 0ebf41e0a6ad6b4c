"""Every judgehooks evaluator as an agno `Scorer` (`agno.scorer.Scorer`): ``await ev.ascore(run,
expected)`` returns agno's ``Score``, so `agno.eval.Case(scorer=ev)` and agno's `run_cases` /
`cli` grade with it.

The run is snapshotted as a post hook snapshots it (redaction included) and graded through the
evaluator's own pipeline (spend caps, store, callbacks, the log event): each call ends as one
stored record, like any other. Not sampled: a suite case asked for a score. A verdict becomes a
``Score``; an evaluation without one (an ``error`` or ``skipped`` record, which is stored) raises
`EvaluatorError`, which agno's runner reports as the case's error, never as a failure.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._base.context import EvalContext, render_content
from .._base.record import EvalRecord
from ..exceptions import EvaluatorError


def with_expected(ctx: EvalContext, expected: Any) -> EvalContext:
    """The snapshot with the case's expected value (agno's ``Case.expected``), as text."""
    return ctx if expected is None else dataclasses.replace(ctx, expected=render_content(expected))


def score_of(record: EvalRecord | None, scale: float) -> Any:
    """agno's ``Score`` for a record: ``value`` is the score over the evaluator's full mark
    (`scale`) held to [0, 1], or 1.0 / 0.0 for a pass / fail without a score; ``passed`` and
    ``reason`` are the record's; ``detail`` names the stored record."""
    from agno.scorer.base import Score

    if record is None:
        raise EvaluatorError("the evaluation could not be stored and left no record (see the store_write_failed "
                             "log event)")
    if record.status not in ("passed", "failed"):
        why = f"{record.error_type}: {record.error_message}" if record.status == "error" else record.reason
        raise EvaluatorError(f"no verdict ({record.status}, record {record.id} stored): {why}")
    passed = bool(record.passed)
    if record.score is None:
        value = 1.0 if passed else 0.0
    else:
        value = min(1.0, max(0.0, float(record.score) / (scale or 1.0)))
    detail: dict[str, Any] = {"record_id": record.id, "evaluator": record.evaluator,
                              "evaluator_version": record.evaluator_version, "score": record.score,
                              "threshold": record.threshold}
    if record.details:
        detail["details"] = dict(record.details)
    return Score(value=value, passed=passed, reason=record.reason, detail=detail)
