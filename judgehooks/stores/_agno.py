"""AgnoDbStore: verdicts as agno eval runs, so AgentOS shows them. FanoutStore: several stores."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import anyio.to_thread

from .._record import EvalRecord
from ._base import Store


def eval_run_payload(record: EvalRecord) -> dict[str, Any]:
    """`eval_data` shaped like agno's AgentAsJudgeResult, plus our status and error fields."""
    graded = record.status in ("passed", "failed")
    evaluation = {"input": record.input, "output": record.output, "criteria": record.criteria,
                  "score": record.score, "reason": record.reason or record.error_message or "",
                  "passed": bool(record.passed)}
    return {
        "run_id": record.id,
        "results": [evaluation] if graded else [],
        "avg_score": record.score, "min_score": record.score, "max_score": record.score,
        "std_dev_score": 0.0 if record.score is not None else None,
        "pass_rate": (100.0 if record.passed else 0.0) if graded else None,
        "status": record.status, "error_type": record.error_type, "error_message": record.error_message,
        "judged_run_id": record.run_id, "session_id": record.session_id, "user_id": record.user_id,
        "latency_ms": record.latency_ms, "details": record.details,
    }


def _is_duplicate(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "unique" in text or "duplicate" in text or "integrity" in text


class AgnoDbStore:
    """Writes each record as an agno `EvalRunRecord` (type agent_as_judge) into an agno db.

    Sync dbs are called on a worker thread, async dbs awaited. Idempotent: the record id is the
    eval run id, and a duplicate insert is taken as already written.
    """

    def __init__(self, db: Any) -> None:
        create = getattr(db, "create_eval_run", None)
        if create is None:
            raise TypeError(f"db must be an agno db with eval support (create_eval_run), got {type(db).__name__}")
        self.db = db
        self._async = inspect.iscoroutinefunction(create)

    def _eval_run(self, record: EvalRecord) -> Any:
        from agno.db.schemas.evals import EvalRunRecord, EvalType

        model = record.judge_model or ""
        provider, _, model_id = model.partition("/") if "/" in model else ("", "", model)
        return EvalRunRecord(
            run_id=record.id, eval_type=EvalType.AGENT_AS_JUDGE, eval_data=eval_run_payload(record),
            agent_id=record.agent_id, team_id=record.team_id, name=record.evaluator,
            model_id=model_id or None, model_provider=provider or None,
            evaluated_component_name=record.agent_name or record.team_name,
            eval_input={"criteria": record.criteria, "scoring_strategy": record.mode,
                        "threshold": record.threshold})

    def _write_one_sync(self, eval_run: Any) -> None:
        try:
            self.db.create_eval_run(eval_run)
        except Exception as exc:
            if not _is_duplicate(exc):
                raise

    async def write(self, records: Sequence[EvalRecord]) -> None:
        for record in records:
            eval_run = self._eval_run(record)
            if self._async:
                try:
                    await self.db.create_eval_run(eval_run)
                except Exception as exc:
                    if not _is_duplicate(exc):
                        raise
            else:
                await anyio.to_thread.run_sync(self._write_one_sync, eval_run)

    async def query(self, *, agent_id: str | None = None, team_id: str | None = None,
                    evaluator: str | None = None, status: str | None = None, run_id: str | None = None,
                    since: datetime | None = None, until: datetime | None = None,
                    limit: int | None = 1000) -> list[EvalRecord]:
        raise NotImplementedError("AgnoDbStore is write-only; query the store it mirrors, or AgentOS")

    async def aclose(self) -> None:
        return None


class FanoutStore:
    """Writes to every store; reads from the first."""

    def __init__(self, primary: Store, *mirrors: Store) -> None:
        self.stores = (primary, *mirrors)

    async def write(self, records: Sequence[EvalRecord]) -> None:
        errors = []
        for store in self.stores:
            try:
                await store.write(records)
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    async def query(self, **filters: Any) -> list[EvalRecord]:
        return await self.stores[0].query(**filters)

    async def aclose(self) -> None:
        for store in self.stores:
            await store.aclose()
