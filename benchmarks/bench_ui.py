"""`judgehooks ui` page times on a large store: every page, over 100,000 records or a million.

    python benchmarks/bench_ui.py                       # 100,000 records (~1-2 minutes to seed)
    python benchmarks/bench_ui.py --records 1000000     # the issue's scale (~15-25 minutes to seed both)
    python benchmarks/bench_ui.py --quick               # 10,000 records
    python benchmarks/bench_ui.py --jsonl 1000,10000,100000   # a JSONL store of each size instead

Each page is fetched through the whole app (routing, the store's SQL, the templates) in this process,
several times; the table gives the median and the range. SQLite always; PostgreSQL with
$JUDGEHOOKS_TEST_POSTGRES_DSN, else a private server started here (stopped at the end), else skipped.
The records are varied the way a deployment's are: 5 agents, 200 users, 4 evaluators with a version
change halfway, a plan in the metadata, session verdicts, a shadow's comparisons, 1,000 human labels,
and reasons of a dozen kinds. Goal: every page at most 500 ms on SQLite and PostgreSQL at a million
records. With --jsonl, the same pages on a JsonlStore of each size (a page reads its whole file once),
with the peak memory of the process: where JSONL stops. Not a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from _common import spread, table  # noqa: E402
from _servers import PostgresServer, create_database, postgres_bindir  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import psycopg  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from judgehooks import EvalRecord, JsonlStore, Label, PostgresStore, SQLiteStore  # noqa: E402
from judgehooks._runtime import runtime  # noqa: E402
from judgehooks.ui import app  # noqa: E402

GOAL_MS = 500
PAGES = [
    ("overview, all time", "/"),
    ("overview, 1 evaluator, 7 days", "/?evaluator=helpful&since=7d"),
    ("records, page 1", "/records"),
    ("records, failed of 1 evaluator", "/records?status=failed&evaluator=polite"),
    ("records, 1 session", "/records?session=s-42"),
    ("records, 1 user", "/records?user=u-17"),
    ("records, meta plan=team", "/records?meta=plan%3Dteam"),
    ("records, page 100", "/records?page=100"),
    ("records, search a rare word", "/records?q=quokka"),
    ("records, search a common word", "/records?q=password"),
    ("records, a common word, 2 filters", "/records?q=refund&status=error&meta=plan%3Dteam"),
    ("records, sorted by score", "/records?sort=score"),
    ("records, sorted by run latency", "/records?sort=run_latency&order=asc"),
    ("records, sorted by cost, 1 evaluator", "/records?sort=cost&evaluator=grounded"),
    ("record detail", "/records/r-77"),
    ("review", "/review"),
    ("sessions", "/sessions"),
    ("session page", "/sessions/s-42"),
    ("calibration", "/calibration"),
    ("compare, 2 versions", "/compare?evaluator=helpful&a=v1&b=v2"),
    ("compare, 2 agents", "/compare?by=agent&evaluator=polite&a=agent-0&b=agent-1"),
    ("compare, 2 windows", "/compare?by=window&evaluator=helpful&a=14d..7d&b=7d.."),
    ("segments, by user", "/segments"),
    ("segments, by meta:plan", "/segments?by=meta%3Aplan&evaluator=helpful"),
    ("failure modes", "/failures"),
    ("shadow report", "/shadow?name=shadow-candidate"),
    ("live marker (/api/latest)", "/api/latest"),
]
EVALUATORS = ("helpful", "polite", "grounded", "concise")
REASONS = (
    "The answer restates the question and cites nothing made up.",
    "The reply ignores the user's second question about billing.",
    "It invents a refund policy the documents do not contain.",
    "Tone is curt and dismissive toward a frustrated customer.",
    "The steps are correct and in the right order.",
    "Links to a settings page that does not exist in the product.",
    "Answers in French although the user wrote in English.",
    "Too long: five paragraphs where two sentences would do.",
    "Gives the password reset steps for the old mobile app.",
    "Polite, accurate and cites the help center article.",
    "Fails to escalate a security report to a human agent.",
    "Mentions an internal ticket number the user cannot see.",
)
SHADOW_EVERY = 500  # one in 500 records is a shadow's comparison
SESSION_EVERY = 400  # one in 400 is a session verdict
LABELS = 1000


def records(n: int, now: datetime, start: int = 0, stop: int | None = None) -> Iterator[EvalRecord]:
    """Records ``start``..``stop`` of ``n`` spread over 30 days (see the module's text for their mix)."""
    step = timedelta(days=30) / n
    for i in range(start, n if stop is None else stop):
        evaluator = EVALUATORS[i % 4]
        passed = (i * 7919) % 10 < 7
        status = "error" if i % 97 == 0 else "passed" if passed else "failed"
        reason = REASONS[(i * 31) % len(REASONS)] + (" A quokka appears." if i == n // 3 else "")
        extra: dict = {}
        if i % SHADOW_EVERY == 1:
            winner = ("candidate", "live", "tie")[i % 3]
            evaluator, extra = "shadow-candidate", {"details": {"winner": winner}, "mode": "binary",
                                                     "threshold": None}
        elif i % SESSION_EVERY == 2:
            extra = {"scope": "session", "run_ids": [f"run-{(i - k) // 4}" for k in range(0, 40, 4)]}
        yield EvalRecord(**{
            "id": f"r-{i}", "created_at": now - step * (n - i), "status": status, "evaluator": evaluator,
            "evaluator_version": "v1" if i < n // 2 else "v2", "mode": "numeric", "threshold": 7,
            "score": None if status == "error" else (8 if passed else 4) + i % 2,
            "passed": None if status == "error" else passed, "reason": reason,
            "agent_id": f"agent-{i % 5}", "agent_name": "support", "run_id": f"run-{i // 4}",
            "session_id": f"s-{i // 40}", "user_id": f"u-{(i // 40) % 200}",
            "metadata": {"plan": ("free", "pro", "team")[(i // 40) % 3]},
            "input": "How do I reset my password? " * 4, "output": "Open Settings, choose Security, then Reset. " * 5,
            "judge_model": "openai/gpt-4o-mini", "latency_ms": 200.0 + i % 50, "cost_usd": 0.0002 + (i % 13) * 1e-5,
            "run_latency_ms": 800.0 + (i * 37) % 2000, "run_input_tokens": 300 + i % 100,
            "run_output_tokens": 120 + i % 60, "run_cost_usd": 0.001 + (i % 17) * 1e-4, **extra})


def seed(store: object, n: int) -> float:
    started, now = time.perf_counter(), datetime.now(UTC)
    for i in range(0, n, 5000):
        runtime.call(store.write, list(records(n, now, i, min(n, i + 5000))))
    labels = [Label(record_id=f"r-{i}", reviewer="bench", passed=(i * 13) % 10 < 6)
              for i in range(0, n, max(1, n // LABELS)) if i % SHADOW_EVERY != 1][:LABELS]
    runtime.call(store.write_labels, labels)
    return time.perf_counter() - started


def measure(name: str, store: object, n: int, repeats: int) -> list[list[object]]:
    client = TestClient(app(store, reviewer="bench"), base_url="http://127.0.0.1")
    rows = []
    for label, path in PAGES:
        started = time.perf_counter()
        reply = client.get(path)  # warm: the first query, template compilation
        cold = (time.perf_counter() - started) * 1000
        assert reply.status_code == 200, (path, reply.status_code, reply.text[:300])
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            client.get(path)
            times.append((time.perf_counter() - started) * 1000)
        middle, span = spread(times)
        rows.append([name, f"{n:,}", label, middle, span, f"{cold:.0f}", "yes" if middle <= GOAL_MS else "NO"])
        print(f"  {name} {label}: {middle:.1f} ms (first {cold:.0f} ms)", flush=True)
    return rows


def jsonl(sizes: list[int], repeats: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in sizes:
            store = JsonlStore(os.path.join(folder, f"evals-{n}.jsonl"))
            seed(store, n)
            rows += [[*row, f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}"]
                     for row in measure("JSONL", store, n, repeats)]
    table(f"judgehooks ui page times on a JSONL store (ms, median of {repeats}; peak MB of the process so far)",
          ["store", "records", "page", "ms", "range", "first", f"<= {GOAL_MS} ms", "peak MB"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="how many records (default 100,000)")
    parser.add_argument("--quick", action="store_true", help="10,000 records")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=("sqlite", "postgres"), help="one database only")
    parser.add_argument("--jsonl", metavar="SIZES", help="time a JSONL store of each size (comma-separated) instead")
    args = parser.parse_args()
    if args.jsonl:
        jsonl([int(n) for n in args.jsonl.split(",")], args.repeats)
        return
    n = 10_000 if args.quick else args.records
    rows = []
    if args.only != "postgres":
        with tempfile.TemporaryDirectory() as folder:
            store = SQLiteStore(os.path.join(folder, "evals.db"))
            print(f"seeding SQLite with {n:,} records: {seed(store, n):.1f} s", flush=True)
            rows += measure("SQLite", store, n, args.repeats)
            store.close()
    admin, server = os.environ.get("JUDGEHOOKS_TEST_POSTGRES_DSN"), None
    if args.only != "sqlite" and admin is None and postgres_bindir() is not None:
        server = PostgresServer().start()
        admin = server.dsn
    if args.only == "sqlite":
        pass
    elif admin is not None:
        try:
            dsn = create_database(admin, f"bench_ui_{os.getpid()}")
            store = PostgresStore(dsn)
            print(f"seeding PostgreSQL with {n:,} records: {seed(store, n):.1f} s", flush=True)
            with psycopg.connect(dsn, autocommit=True) as conn:  # as autovacuum does soon after a load
                conn.execute("VACUUM ANALYZE eval_records")  # statistics, and the visibility map index-only scans need
            rows += measure("PostgreSQL", store, n, args.repeats)
            runtime.call(store.aclose)
        finally:
            if server is not None:
                server.close()
    else:
        print("PostgreSQL: skipped (apt-get install postgresql, or set JUDGEHOOKS_TEST_POSTGRES_DSN)")
    table(f"judgehooks ui page times (ms, median of {args.repeats} warm fetches; first = the first fetch; "
          f"goal <= {GOAL_MS} ms)", ["store", "records", "page", "ms", "range", "first", f"<= {GOAL_MS} ms"], rows)


if __name__ == "__main__":
    main()
