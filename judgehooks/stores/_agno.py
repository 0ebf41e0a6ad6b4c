"""AgnoDbStore: verdicts as agno eval runs, so AgentOS shows them. FanoutStore: several stores."""

from __future__ import annotations

import functools
import inspect
import os
import weakref
from collections.abc import Collection, Sequence
from typing import Any

import anyio.to_thread

from .._base.jsondata import storable
from .._base.label import Label
from .._base.record import EvalRecord, split_model
from .._runtime import runtime
from ..exceptions import StoreError
from . import _agnorows
from ._agnorows import KEY
from ._base import BaseStore, RecordFilter

#: eval runs read per `get_eval_runs` call
PAGE = 500


def _evaluation(record: EvalRecord) -> dict[str, Any]:
    """One result exactly as agno's `asdict(AgentAsJudgeEvaluation)` has it (its six fields)."""
    return {"input": record.input, "output": record.output, "criteria": record.criteria, "score": record.score,
            "reason": record.reason or record.error_message or "", "passed": bool(record.passed)}


def _stats(graded: Sequence[EvalRecord]) -> dict[str, Any]:
    """agno's AgentAsJudgeResult statistics over the graded records."""
    import statistics

    scores = [r.score for r in graded if r.score is not None]
    return {"avg_score": statistics.mean(scores) if scores else None, "min_score": min(scores, default=None),
            "max_score": max(scores, default=None),
            "std_dev_score": (statistics.stdev(scores) if len(scores) > 1 else 0.0) if scores else None,
            "pass_rate": 100.0 * sum(bool(r.passed) for r in graded) / len(graded) if graded else None}


def eval_run_payload(record: EvalRecord) -> dict[str, Any]:
    """`eval_data` with agno's AgentAsJudgeResult keys, and ours under one key, ``judgehooks``:
    ``{"record": ...}``, the whole record (status, errors, ids, version, latency, details...)."""
    graded = [record] if record.status in ("passed", "failed") else []
    return {"run_id": record.id, "results": [_evaluation(r) for r in graded], **_stats(graded),
            KEY: {"record": _agnorows.record_payload(record, bool(graded))}}  # read back by `query`


def batch_payload(run_id: str, records: Sequence[EvalRecord]) -> dict[str, Any]:
    """`eval_data` of an offline batch: one agno eval run holding every graded case, as agno's
    ``run(cases=...)`` writes it; under ``judgehooks``, ``{"batch": ...}``: the graded cases' record
    ids (in the order of ``results``), and the errors and skips counted beside them."""
    graded = [r for r in records if r.status in ("passed", "failed")]
    batch = {"evaluator_version": records[0].evaluator_version if records else None,
             "graded_count": len(graded), "error_count": sum(r.status == "error" for r in records),
             "skipped_count": sum(r.status == "skipped" for r in records), "ids": [r.id for r in graded],
             "errors": [{"id": r.id, "input": r.input, "error_type": r.error_type, "error_message": r.error_message}
                        for r in records if r.status == "error"]}
    return {"run_id": run_id, "results": [_evaluation(r) for r in graded], **_stats(graded), KEY: {"batch": batch}}


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


def open_agno_db(url: str) -> Any:
    """An agno db from a URL: ``sqlite:///path.db`` (SqliteDb) or ``postgresql://...`` (PostgresDb, psycopg 3)."""
    scheme = url.partition("://")[0].lower()
    if scheme == "sqlite":
        from agno.db.sqlite import SqliteDb

        return SqliteDb(db_url=url)
    if scheme.split("+", 1)[0] in ("postgresql", "postgres"):
        from agno.db.postgres import PostgresDb

        return PostgresDb(db_url="postgresql+psycopg://" + url.partition("://")[2])
    raise ValueError(f"an agno db URL is sqlite:///path.db or postgresql://user@host/db, got a {scheme or 'bare'!r} "
                     "URL")


_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}


def db_location(db: Any) -> str:
    """Where an agno db keeps its eval runs, written the same by every process that opens it
    (``SqliteDb(db_file="agno.db")`` here, ``--store agno+sqlite:///agno.db`` there), without a
    password: the store's repr, so its outbox file and spilled rows are found again by name."""
    url = getattr(getattr(db, "db_engine", None), "url", None)
    table = getattr(db, "eval_table_name", None) or "agno_eval_runs"
    if url is None:  # not SQLAlchemy (MongoDb, JsonDb, ...): agno's own id for it
        return f"{type(db).__name__} id={getattr(db, 'id', None)!r} table={table}"
    backend = url.get_backend_name()
    if backend == "sqlite":
        database = url.database or ":memory:"
        return f"sqlite:///{database if database == ':memory:' else os.path.abspath(database)} table={table}"
    port = url.port or _DEFAULT_PORTS.get(backend)
    schema = getattr(db, "db_schema", None)
    return (f"{backend}://{url.username or ''}@{url.host or ''}:{port or ''}/{url.database or ''} "
            f"{f'schema={schema} ' if schema else ''}table={table}")


def _field(row: Any, name: str) -> Any:
    return row.get(name) if isinstance(row, dict) else getattr(row, name, None)


def _release_at_exit(ref: weakref.ref[AgnoDbStore], pid: int) -> None:
    """At exit (a runtime closer, after the drain): close the pooled connections of a SQLite agno
    db, so SQLite folds its WAL into the file and removes the -wal and -shm files, as agno alone
    leaves them. (agno's SqliteDb opens its file in WAL mode; the pool keeps a connection our writes
    used, and interpreter exit does not reliably close it.) Only in the process that used it: a
    forked child closing inherited SQLite handles would drop the parent's locks. Async engines are
    disposed on the judgehooks loop."""
    store = ref()
    engine = None if store is None or os.getpid() != pid else getattr(store.db, "db_engine", None)
    url = getattr(engine, "url", None)
    if engine is None or url is None or url.get_backend_name() != "sqlite":
        return
    if store is not None and store._async:
        runtime.call(engine.dispose)  # an AsyncEngine: its connections close on a loop
    else:
        engine.dispose()


class AgnoDbStore(BaseStore):
    """Writes each record as an agno `EvalRunRecord` (type agent_as_judge) into an agno db, so
    AgentOS lists it under `/eval-runs?agent_id=...`.

    Each eval run also holds the whole record, so the store reads back (`query`, for `judgehooks
    report`, `calibrate`, `review`); human labels are eval runs of their own (see `_agnorows`).
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
        self._closer_pid: int | None = None  # the process whose exit releases the db's pooled SQLite connections

    def __repr__(self) -> str:
        return f"AgnoDbStore({db_location(self.db)})"

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
        if self._closer_pid != os.getpid():
            self._closer_pid = os.getpid()
            runtime.add_closer(functools.partial(_release_at_exit, weakref.ref(self), os.getpid()), order=1)
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

    async def _runs(self, **filters: Any) -> list[tuple[str, Any]]:
        """(run id, eval_data) of every agent_as_judge eval run `filters` (get_eval_runs') match, a page at a time."""
        from agno.db.schemas.evals import EvalType

        found: dict[str, Any] = {}
        page = 1
        while True:
            rows = await self._call("get_eval_runs", limit=PAGE, page=page, eval_type=[EvalType.AGENT_AS_JUDGE],
                                    **filters)
            for row in rows or []:
                found.setdefault(str(_field(row, "run_id")), _field(row, "eval_data"))
            if len(rows or []) < PAGE:
                return list(found.items())
            page += 1

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        """The records this store wrote (each eval run's ``eval_data["record"]``); filtered here but
        for the agent and team, which agno filters. Eval runs agno wrote itself, offline batches and
        rows written before records were kept hold no record and are not read."""
        rows = await self._runs(agent_id=where.agent_id, team_id=where.team_id)
        records = [r for run_id, data in rows if (r := _agnorows.record_of(run_id, data)) is not None]
        return where.select(records, limit)

    async def records_by_id(self, ids: Collection[str]) -> list[EvalRecord]:
        found = []
        for record_id in sorted(set(ids)):
            row = await self._call("get_eval_run", record_id, deserialize=False)
            record = None if row is None else _agnorows.record_of(record_id, _field(row, "eval_data"))
            if record is not None:
                found.append(record)
        return found

    async def _label_rows(self) -> list[tuple[str, Label]]:
        rows = await self._runs(model_id=_agnorows.LABEL_MODEL)
        return [(run_id, label) for run_id, data in rows if (label := _agnorows.label_of(run_id, data)) is not None]

    async def write_labels(self, labels: Sequence[Label]) -> None:
        """Each label as an eval run of its own (agno's eval table has no labels and no update of
        ``eval_data``); then the reviewer's earlier rows for the record go, so the last label written
        is the one kept. A crash in between leaves both rows, and `read_labels` takes the newest."""
        from agno.db.schemas.evals import EvalRunRecord, EvalType

        if not labels:
            return
        written: dict[tuple[str, str], str] = {}
        for label in labels:
            run = EvalRunRecord(run_id=_agnorows.label_run_id(label), eval_type=EvalType.AGENT_AS_JUDGE,
                                eval_data=_agnorows.label_payload(label), name=_agnorows.LABEL_NAME,
                                model_id=_agnorows.LABEL_MODEL, model_provider=_agnorows.LABEL_PROVIDER)
            await self._create(run, None)
            written[(label.record_id, label.reviewer)] = run.run_id
        stale = [run_id for run_id, label in await self._label_rows()
                 if written.get((label.record_id, label.reviewer), run_id) != run_id]
        if stale:
            await self._call("delete_eval_runs", stale)

    async def read_labels(self) -> list[Label]:
        """Every label kept, the newest per (record, reviewer)."""
        return _agnorows.newest(await self._label_rows())[0]


