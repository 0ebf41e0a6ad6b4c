"""AgnoDbStore: verdicts as agno eval runs, so AgentOS shows them. FanoutStore: several stores."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import anyio.to_thread

from .._base.record import EvalRecord
from ..exceptions import StoreError
from ._base import BaseStore, RecordFilter, storable


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

    def __init__(self, db: Any) -> None:
        problem = _unsupported(db)
        if problem is not None:
            raise TypeError(problem)
        self.db = db
        self._async = inspect.iscoroutinefunction(type(db).create_eval_run)

    def __repr__(self) -> str:
        return f"AgnoDbStore({type(self.db).__name__} id={getattr(self.db, 'id', None)!r})"

    def _eval_run(self, record: EvalRecord) -> Any:
        from agno.db.schemas.evals import EvalRunRecord, EvalType

        record = storable(record)  # agno's db serialises eval_data with plain json

        model = record.judge_model or ""
        provider, _, model_id = model.partition("/") if "/" in model else ("", "", model)
        return EvalRunRecord(
            run_id=record.id, eval_type=EvalType.AGENT_AS_JUDGE, eval_data=eval_run_payload(record),
            agent_id=record.agent_id, team_id=record.team_id, name=record.evaluator,
            model_id=model_id or None, model_provider=provider or None,
            evaluated_component_name=record.agent_name or record.team_name,
            eval_input={"criteria": record.criteria, "scoring_strategy": record.mode,
                        "threshold": record.threshold})

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self.db, method)
        if self._async:
            return await fn(*args, **kwargs)
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    async def _write_one(self, record: EvalRecord) -> None:
        row = await self._call("get_eval_run", record.id, deserialize=False)
        if row is None:
            try:
                if await self._call("create_eval_run", self._eval_run(record)) is None:
                    # agno returns None instead of raising when, e.g., its table could not be had
                    raise StoreError(f"{type(self.db).__name__}.create_eval_run stored nothing for record "
                                     f"{record.id} (it returned None)")
            except Exception:
                row = await self._call("get_eval_run", record.id, deserialize=False)
                if row is None:
                    raise  # not a duplicate: a real failure
        if record.user_id is not None and (row is None or _field(row, "user_id") != record.user_id):
            await self._call("update_eval_run_user_id", record.id, record.user_id)

    async def write(self, records: Sequence[EvalRecord]) -> None:
        for record in records:
            await self._write_one(record)

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        raise NotImplementedError("AgnoDbStore is write-only; query the store it mirrors, or AgentOS")


