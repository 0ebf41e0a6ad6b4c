"""AgnoDbStore: verdicts as agno eval runs, so AgentOS shows them. FanoutStore: several stores."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import anyio.to_thread

from .._base.jsondata import storable
from .._base.record import EvalRecord, split_model
from ..exceptions import StoreError
from ._base import BaseStore, RecordFilter


def _evaluation(record: EvalRecord) -> dict[str, Any]:
    """One result as agno's `asdict(AgentAsJudgeEvaluation)` has it, plus the record's id and status."""
    return {"input": record.input, "output": record.output, "criteria": record.criteria, "score": record.score,
            "reason": record.reason or record.error_message or "", "passed": bool(record.passed),
            "id": record.id, "status": record.status}


def _stats(graded: Sequence[EvalRecord]) -> dict[str, Any]:
    """agno's AgentAsJudgeResult statistics over the graded records."""
    import statistics

    scores = [r.score for r in graded if r.score is not None]
    return {"avg_score": statistics.mean(scores) if scores else None, "min_score": min(scores, default=None),
            "max_score": max(scores, default=None),
            "std_dev_score": (statistics.stdev(scores) if len(scores) > 1 else 0.0) if scores else None,
            "pass_rate": 100.0 * sum(bool(r.passed) for r in graded) / len(graded) if graded else None}


def eval_run_payload(record: EvalRecord) -> dict[str, Any]:
    """`eval_data` shaped like agno's AgentAsJudgeResult, plus our status and error fields."""
    graded = [record] if record.status in ("passed", "failed") else []
    return {
        "run_id": record.id, "results": [_evaluation(r) for r in graded], **_stats(graded),
        "status": record.status, "error_type": record.error_type, "error_message": record.error_message,
        "evaluator_version": record.evaluator_version,
        "judged_run_id": record.run_id, "session_id": record.session_id, "user_id": record.user_id,
        "scope": record.scope, "judged_run_ids": record.run_ids,  # a session record: the runs it covered
        "judged_component": record.agent_name or record.team_name,
        "latency_ms": record.latency_ms, "details": record.details,
        "trace_id": record.trace_id, "span_id": record.span_id,
    }


def batch_payload(run_id: str, records: Sequence[EvalRecord]) -> dict[str, Any]:
    """`eval_data` of an offline batch: one agno eval run holding every graded case, as agno's
    ``run(cases=...)`` writes it, with the errors and skips counted beside it."""
    graded = [r for r in records if r.status in ("passed", "failed")]
    return {"run_id": run_id, "results": [_evaluation(r) for r in graded], **_stats(graded),
            "evaluator_version": records[0].evaluator_version if records else None,
            "graded_count": len(graded), "error_count": sum(r.status == "error" for r in records),
            "skipped_count": sum(r.status == "skipped" for r in records),
            "errors": [{"id": r.id, "input": r.input, "error_type": r.error_type, "error_message": r.error_message}
                       for r in records if r.status == "error"]}


def eval_input(record: EvalRecord) -> dict[str, Any]:
    """agno's `eval_input`: what the judge was asked, as the record says it was used."""
    return {"criteria": record.criteria, "scoring_strategy": record.mode,
            "threshold": record.threshold if record.mode == "numeric" else None,
            "additional_guidelines": record.metadata.get("additional_guidelines")}


_SUPPORTED = "SqliteDb, PostgresDb, MySQLDb, MongoDb, InMemoryDb, JsonDb, AsyncSqliteDb, AsyncPostgresDb, ..."


def _unsupported(db: Any) -> str | None:
    """Why `db` cannot hold our verdicts as agno eval runs, or None when it can."""
    from agno.db.base import AsyncBaseDb, BaseDb

    name = type(db).__name__
    base = AsyncBaseDb if isinstance(db, AsyncBaseDb) else BaseDb if isinstance(db, BaseDb) else None
    if base is None:
        return (f"db must be an agno database (agno.db.base.BaseDb or AsyncBaseDb) that AgentOS reads eval runs "
                f"from, e.g. {_SUPPORTED}; got {name}")
    missing = [m for m in ("create_eval_run", "get_eval_run", "update_eval_run_user_id")
               if getattr(type(db), m, None) is getattr(base, m)]
    if missing or name == "ClickhouseDb":  # ClickhouseDb is agno's traces-only adapter: its eval methods raise
        return (f"db {name} does not store agno eval runs with an owner "
                f"({', '.join(missing) or 'traces-only adapter'}); use one of {_SUPPORTED}")
    return None


def _field(row: Any, name: str) -> Any:
    return row.get(name) if isinstance(row, dict) else getattr(row, name, None)


class AgnoDbStore(BaseStore):
    """Writes each record as an agno `EvalRunRecord` (type agent_as_judge) into an agno db, so
    AgentOS lists it under `/eval-runs?agent_id=...`.

    Sync dbs run on a worker thread, async dbs are awaited: the event loop is never blocked.
    Idempotent on any db: the record id is the eval run id, an existing run is not inserted
    again (a racing duplicate insert is recognised by reading it back), and the owner
    (`user_id`, which EvalRunRecord lacks) is set with `update_eval_run_user_id`.
    """

    def __init__(self, db: Any, *, name: str | None = None) -> None:
        problem = _unsupported(db)
        if problem is not None:
            raise TypeError(problem)
        self.db = db
        self.name = name  # the eval runs' name, as agno's: the evaluator's `name=` (None when not given)
        self._async = inspect.iscoroutinefunction(type(db).create_eval_run)

    def __repr__(self) -> str:
        return f"AgnoDbStore({type(self.db).__name__} id={getattr(self.db, 'id', None)!r})"

    def _eval_run(self, record: EvalRecord, run_id: str | None = None, data: dict[str, Any] | None = None) -> Any:
        from agno.db.schemas.evals import EvalRunRecord, EvalType

        record = storable(record)  # agno's db serialises eval_data with plain json

        provider, model_id = split_model(record.judge_model or "")
        return EvalRunRecord(
            run_id=run_id or record.id, eval_type=EvalType.AGENT_AS_JUDGE,
            eval_data=eval_run_payload(record) if data is None else data,
            agent_id=record.agent_id, team_id=record.team_id, name=self.name,
            model_id=model_id or None, model_provider=provider or None, eval_input=eval_input(record))

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self.db, method)
        if self._async:
            return await fn(*args, **kwargs)
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    async def _create(self, run: Any, user_id: str | None) -> None:
        """Insert one eval run unless it is there (idempotent on its id), then set its owner."""
        row = await self._call("get_eval_run", run.run_id, deserialize=False)
        if row is None:
            try:
                if await self._call("create_eval_run", run) is None:
                    # agno returns None instead of raising when, e.g., its table could not be had
                    raise StoreError(f"{type(self.db).__name__}.create_eval_run stored nothing for eval run "
                                     f"{run.run_id} (it returned None)")
            except Exception:
                row = await self._call("get_eval_run", run.run_id, deserialize=False)
                if row is None:
                    raise  # not a duplicate: a real failure
        if user_id is not None and (row is None or _field(row, "user_id") != user_id):
            await self._call("update_eval_run_user_id", run.run_id, user_id)

    async def write(self, records: Sequence[EvalRecord]) -> None:
        """One eval run per record: a live hook's verdict on one judged run, as agno writes it."""
        for record in records:
            await self._create(self._eval_run(record), record.user_id)

    async def write_batch(self, run_id: str, records: Sequence[EvalRecord]) -> None:
        """One eval run for an offline batch (`run(cases=...)`), holding every case, as agno writes it."""
        if records:
            await self._create(self._eval_run(records[0], run_id, batch_payload(run_id, records)), None)

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        raise NotImplementedError("AgnoDbStore is write-only; query the store it mirrors, or AgentOS")


