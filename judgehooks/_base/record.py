"""EvalRecord: the one stored outcome of one evaluation, and the pure functions that build it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .text import storable_data

Status = Literal["passed", "failed", "error", "skipped"]
Mode = Literal["binary", "numeric"]
STATUSES: tuple[str, ...] = ("passed", "failed", "error", "skipped")

# Fixed namespace: record ids must be the same in every process that grades the same run.
_NAMESPACE = uuid.UUID("6f1c7a52-3d0e-4f55-9a8c-1b1f0c2e9d41")


def record_id(evaluator: str, run_id: str, case_index: int | None = None) -> str:
    """Deterministic id: the same judged run and evaluator always give the same id."""
    key = f"{evaluator}\x1f{run_id}" if case_index is None else f"{evaluator}\x1f{run_id}\x1f{case_index}"
    return str(uuid.uuid5(_NAMESPACE, key))


def utcnow() -> datetime:
    return datetime.now(UTC)


class EvalRecord(BaseModel):
    """One evaluation's outcome. ``status`` is one of passed, failed, error, skipped.

    A judge outage or an unreadable reply is ``error`` (with ``error_type`` / ``error_message``),
    never ``failed``; ``passed`` is None unless a verdict was reached.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    created_at: datetime = Field(default_factory=utcnow)
    status: Status
    evaluator: str
    mode: Mode
    threshold: int | float | None = None  # an LLM judge's is an integer 1-10; a check's may be any number
    score: float | None = None
    passed: bool | None = None
    reason: str | None = None
    agent_id: str | None = None
    agent_name: str | None = None
    team_id: str | None = None
    team_name: str | None = None
    run_id: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    input: str = ""
    output: str = ""
    judge_model: str | None = None
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    attempts: int = 0
    sample_rate: float = 1.0  # the probability this run was sampled with: weight pass rates by 1/sample_rate
    error_type: str | None = None
    error_message: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # What the evaluator saw beyond score and reason: per criterion, per check, per sample.
    details: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        """Every string a store will write is UTF-8-encodable (a lone surrogate becomes U+FFFD), also
        the ones no snapshot cleaned: a judge's reason, an error message, metadata, details."""
        return storable_data(data) if isinstance(data, dict) else data

    @property
    def criteria(self) -> str | None:
        """agno's `AgentAsJudgeEvaluation` exposes the criteria; on_fail callbacks may read it."""
        return self.metadata.get("criteria")


# Column order of a record in stores; every field is one column.
FIELDS: tuple[str, ...] = tuple(EvalRecord.model_fields)
