"""The judge's usage folded into the run it judged, as agno's own `AgentAsJudgeEval` does.

agno calls `agno.metrics.accumulate_eval_metrics` with the judge agent's metrics and the judged
run's: the judge's tokens and cost join the run's totals, its model appears under
``details["eval_model"]`` and its time under ``additional_metrics["eval_duration"]``. Inline
grading does the same from the record; background grading cannot (the run has returned), and
the record carries the usage instead.
"""

from __future__ import annotations

from typing import Any

from .._base.record import EvalRecord, split_model


def judge_metrics(record: EvalRecord) -> Any:
    """The judge's usage for one record as agno `RunMetrics`, or None when no model was asked."""
    if not record.judge_model or record.attempts == 0:
        return None
    from agno.metrics import ModelMetrics, RunMetrics

    provider, model_id = split_model(record.judge_model)
    tokens_in, tokens_out = record.prompt_tokens or 0, record.completion_tokens or 0
    model = ModelMetrics(id=model_id, provider=provider, input_tokens=tokens_in, output_tokens=tokens_out,
                         total_tokens=tokens_in + tokens_out, cost=record.cost_usd)
    return RunMetrics(input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out,
                      cost=record.cost_usd, details={"model": [model]},
                      duration=None if record.latency_ms is None else record.latency_ms / 1000)


def fold_judge_usage(record: EvalRecord | None, run_metrics: Any) -> None:
    """Add the judge's usage behind `record` to `run_metrics` (a judged run's, or one a caller of
    ``run(run_metrics=...)`` passed), exactly as agno's evaluator does."""
    if record is None or run_metrics is None:
        return
    metrics = judge_metrics(record)
    if metrics is not None:
        from agno.metrics import accumulate_eval_metrics

        accumulate_eval_metrics(metrics, run_metrics)
