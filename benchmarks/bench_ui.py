"""`judgehooks ui` page times on a large store: the overview and records pages over 100,000 records.

    python benchmarks/bench_ui.py            # 100,000 records (~1-2 minutes to seed)
    python benchmarks/bench_ui.py --quick    # 10,000 records
    python benchmarks/bench_ui.py --jsonl 1000,10000,100000   # a JSONL store of each size instead

Each page is fetched through the whole app (routing, the store's SQL, the templates) in this process,
several times; the table gives the median and the range. SQLite always; PostgreSQL with
$JUDGEHOOKS_TEST_POSTGRES_DSN, else a private server started here (stopped at the end), else skipped.
Goal: every page under 300 ms on SQLite. With --jsonl, the same pages on a JsonlStore of each size
(a page reads its whole file once), with the peak memory of the process: where JSONL stops. Not a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from _common import spread, table  # noqa: E402
from _servers import PostgresServer, create_database, postgres_bindir  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from starlette.testclient import TestClient  # noqa: E402

from judgehooks import EvalRecord, JsonlStore, PostgresStore, SQLiteStore  # noqa: E402
from judgehooks._runtime import runtime  # noqa: E402
from judgehooks.ui import app  # noqa: E402

PAGES = [
    ("overview, all time", "/"),
    ("overview, 1 evaluator, 7 days", "/?evaluator=helpful&since=7d"),
    ("records, page 1", "/records"),
    ("records, failed of 1 evaluator", "/records?status=failed&evaluator=polite"),
    ("records, 1 session", "/records?session=s-42"),
    ("records, page 100", "/records?page=100"),
    ("record detail", "/records/r-77"),
    ("review", "/review"),
    ("sessions", "/sessions"),
    ("compare, 2 versions", "/compare?evaluator=helpful&a=v1&b=v2"),
    ("compare, 2 agents", "/compare?by=agent&evaluator=polite&a=agent-0&b=agent-1"),
]
EVALUATORS = ("helpful", "polite", "grounded", "concise")


def records(n: int, now: datetime) -> list[EvalRecord]:
    """`n` records over 30 days: 5 agents, 4 evaluators with a version change halfway, realistic text."""
    step = timedelta(days=30) / n
    found = []
    for i in range(n):
        evaluator = EVALUATORS[i % 4]
        passed = (i * 7919) % 10 < 7
        status = "error" if i % 97 == 0 else "passed" if passed else "failed"
        found.append(EvalRecord(
            id=f"r-{i}", created_at=now - step * (n - i), status=status, evaluator=evaluator,
            evaluator_version="v1" if i < n // 2 else "v2", mode="numeric", threshold=7,
            score=None if status == "error" else (8 if passed else 4) + i % 2, passed=None if status == "error"
            else passed, reason="The answer restates the question and cites nothing made up.",
            agent_id=f"agent-{i % 5}", agent_name="support", run_id=f"run-{i // 4}", session_id=f"s-{i // 40}",
            input="How do I reset my password? " * 4, output="Open Settings, choose Security, then Reset. " * 5,
            judge_model="openai/gpt-4o-mini", latency_ms=200.0 + i % 50, cost_usd=0.0002))
    return found


def seed(store: object, recs: list[EvalRecord]) -> float:
    start = time.perf_counter()
    for i in range(0, len(recs), 5000):
        runtime.call(store.write, recs[i:i + 5000])
    return time.perf_counter() - start


def measure(name: str, store: object, n: int, repeats: int) -> list[list[object]]:
    client = TestClient(app(store, reviewer="bench"), base_url="http://127.0.0.1")
    rows = []
    for label, path in PAGES:
        reply = client.get(path)  # warm: the first query, template compilation
        assert reply.status_code == 200, (path, reply.status_code, reply.text[:300])
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            client.get(path)
            times.append((time.perf_counter() - start) * 1000)
        middle, span = spread(times)
        rows.append([name, f"{n:,}", label, middle, span, "yes" if middle < 300 else "no"])
    return rows


def jsonl(sizes: list[int], repeats: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in sizes:
            store = JsonlStore(os.path.join(folder, f"evals-{n}.jsonl"))
            seed(store, records(n, datetime.now(UTC)))
            rows += [[*row, f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}"]
                     for row in measure("JSONL", store, n, repeats)]
    table(f"judgehooks ui page times on a JSONL store (ms, median of {repeats}; peak MB of the process so far)",
          ["store", "records", "page", "ms", "range", "< 300 ms", "peak MB"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 records instead of 100,000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jsonl", metavar="SIZES", help="time a JSONL store of each size (comma-separated) instead")
    args = parser.parse_args()
    if args.jsonl:
        jsonl([int(n) for n in args.jsonl.split(",")], args.repeats)
        return
    n = 10_000 if args.quick else 100_000
    recs = records(n, datetime.now(UTC))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(os.path.join(folder, "evals.db"))
        print(f"seeding SQLite with {n:,} records: {seed(store, recs):.1f} s", flush=True)
        rows += measure("SQLite", store, n, args.repeats)
        store.close()
    admin, server = os.environ.get("JUDGEHOOKS_TEST_POSTGRES_DSN"), None
    if admin is None and postgres_bindir() is not None:
        server = PostgresServer().start()
        admin = server.dsn
    if admin is not None:
        try:
            store = PostgresStore(create_database(admin, f"bench_ui_{os.getpid()}"))
            print(f"seeding PostgreSQL with {n:,} records: {seed(store, recs):.1f} s", flush=True)
            rows += measure("PostgreSQL", store, n, args.repeats)
            runtime.call(store.aclose)
        finally:
            if server is not None:
                server.close()
    else:
        print("PostgreSQL: skipped (apt-get install postgresql, or set JUDGEHOOKS_TEST_POSTGRES_DSN)")
    table(f"judgehooks ui page times (ms, median of {args.repeats}; goal < 300 ms on SQLite)",
          ["store", "records", "page", "ms", "range", "< 300 ms"], rows)


if __name__ == "__main__":
    main()
