"""Store write throughput: judgehooks' batched stores beside agno's own db writes (one eval run per call).

    python benchmarks/bench_stores.py            # full run (~1-2 minutes)
    python benchmarks/bench_stores.py --quick    # fewer records

PostgreSQL: $JUDGEHOOKS_TEST_POSTGRES_DSN if set, else a private server started here with
production durability (fsync on), stopped by PID at the end. Every store gets the same records;
ratios are against agno's writer on the same engine, measured in the same run. Not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from _common import table  # noqa: E402
from _servers import PostgresServer, create_database, postgres_bindir  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.db.postgres import PostgresDb  # noqa: E402
from agno.db.sqlite import SqliteDb  # noqa: E402

from judgehooks import AgnoDbStore, EvalRecord, JsonlStore, PostgresStore, SQLiteStore  # noqa: E402
from judgehooks._runtime import runtime  # noqa: E402


def records(n: int) -> list[EvalRecord]:
    """Realistic records: a few hundred bytes of input and output, a reason, some metadata."""
    return [EvalRecord(id=str(uuid.uuid4()), status="passed" if i % 4 else "failed", evaluator="helpful",
                       mode="numeric", threshold=7, score=float(i % 10), passed=bool(i % 4),
                       reason="The answer restates the question and cites nothing made up. " * 2,
                       agent_id=f"agent-{i % 5}", agent_name="support", run_id=str(uuid.uuid4()),
                       session_id=f"s-{i % 100}", user_id=f"u-{i % 50}", input="How do I reset my password? " * 4,
                       output="Open Settings, choose Security, then Reset password. " * 5,
                       judge_model="openai/gpt-4o-mini", latency_ms=212.5, prompt_tokens=420, completion_tokens=38,
                       attempts=1, metadata={"criteria": "helpful", "route": "/chat"}) for i in range(n)]


def ours(store_factory: Callable[[], object], recs: list[EvalRecord], batch: int) -> tuple[float, float]:
    """(records/s, client CPU us/record) writing `recs` in batches of `batch` on the judgehooks loop,
    where grading writes from."""
    store = store_factory()

    async def run() -> tuple[float, float]:
        await store.write(recs[:1])  # open the file / pool, create the schema: not timed
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(1, len(recs), batch):
            await store.write(recs[i:i + batch])
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        await store.aclose()
        return (len(recs) - 1) / elapsed, cpu * 1e6 / (len(recs) - 1)

    return runtime.call(run)


def agno_one_per_call(db: object, recs: list[EvalRecord]) -> tuple[float, float]:
    """(records/s, client CPU us/record) through agno's own `create_eval_run`, one call per record
    (how agno's evaluators write)."""
    mirror = AgnoDbStore(db)  # only to build the same EvalRunRecord agno's evaluator would
    runs = [mirror._eval_run(r) for r in recs]
    db.create_eval_run(runs[0])
    start, cpu = time.perf_counter(), time.process_time()
    for run in runs[1:]:
        db.create_eval_run(run)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return (len(runs) - 1) / elapsed, cpu * 1e6 / (len(runs) - 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 5_000 if args.quick else 20_000
    n_agno = 300 if args.quick else 1_000
    batches = (1, 64, 512) if args.quick else (1, 64, 512, 4096)
    recs = records(n)
    tmp = tempfile.mkdtemp(prefix="judgehooks-bench-")
    server = None
    admin = os.environ.get("JUDGEHOOKS_TEST_POSTGRES_DSN")
    if admin is None and postgres_bindir() is not None:
        server = PostgresServer(durable=True).start()
        admin = server.dsn
    try:
        rows: list[list[object]] = []

        def add(writer: str, batch: int, count: int, measured: tuple[float, float], base: float) -> None:
            rows.append([writer, batch, count, measured[0], measured[1], f"{measured[0] / base:.1f}x"])

        agno_sqlite = agno_one_per_call(SqliteDb(db_file=os.path.join(tmp, "agno.db")), records(n_agno))
        add("agno SqliteDb.create_eval_run", 1, n_agno, agno_sqlite, agno_sqlite[0])
        add("AgnoDbStore(SqliteDb), i.e. db=", 64, n_agno,
            ours(lambda: AgnoDbStore(SqliteDb(db_file=os.path.join(tmp, "mirror.db"))), records(n_agno), 64),
            agno_sqlite[0])
        for kind, factory in (("SQLiteStore", lambda b: SQLiteStore(os.path.join(tmp, f"ours-{b}.db"))),
                              ("JsonlStore", lambda b: JsonlStore(os.path.join(tmp, f"ours-{b}.jsonl")))):
            for b in batches:
                count = min(n, 2_000) if b == 1 else n
                add(f"judgehooks {kind}", b, count, ours(lambda b=b, f=factory: f(b), recs[:count], b), agno_sqlite[0])
        if admin is not None:
            agno_pg = agno_one_per_call(
                PostgresDb(db_url=create_database(admin, "bench_agno").replace("postgresql://", "postgresql+psycopg://",
                                                                               1)), records(n_agno))
            add("agno PostgresDb.create_eval_run", 1, n_agno, agno_pg, agno_pg[0])
            for b in batches:
                count = min(n, 2_000) if b == 1 else n
                dsn = create_database(admin, f"bench_ours_{b}")
                add("judgehooks PostgresStore", b, count, ours(lambda dsn=dsn: PostgresStore(dsn), recs[:count], b),
                    agno_pg[0])
        else:
            print("PostgreSQL rows skipped: no server "
                  "(apt-get install postgresql, or set JUDGEHOOKS_TEST_POSTGRES_DSN)")
        table("Store writes: records/s and client CPU per record; ratio vs agno's writer on the same engine "
              "(JsonlStore vs agno SqliteDb)" + (", PostgreSQL with fsync on" if server else ""),
              ["writer", "batch", "records", "records/s", "CPU us/record", "vs agno"], rows)
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    main()
