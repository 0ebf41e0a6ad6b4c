"""`judgehooks report` over a large SQLite store: wall time and peak memory of the command, which
reads the store a page at a time, beside the same report computed after reading every record at
once (`query(limit=None)`). Each runs in a fresh process; peak RSS comes from the kernel.

    python benchmarks/bench_cli.py --records 20000 100000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta

sys.path.insert(0, os.path.dirname(__file__))

import anyio  # noqa: E402
from _common import table  # noqa: E402

from judgehooks import EvalRecord, SQLiteStore  # noqa: E402

ALL_AT_ONCE = """
import json, sys
from judgehooks import SQLiteStore
from judgehooks._cli.stats import Report
report = Report()
for record in SQLiteStore(sys.argv[1]).query_sync(limit=None):
    report.add(record)
print(json.dumps(report.to_json())[:0])
"""


def fill(path: str, n: int) -> None:
    """n records from 10 agents and 2 evaluators over the last day, with realistic text sizes."""
    store = SQLiteStore(path)
    start = datetime.now(UTC) - timedelta(hours=23)
    batch: list[EvalRecord] = []
    for i in range(n):
        status = ("passed", "passed", "passed", "failed", "error", "skipped")[i % 6]
        score = None if status in ("error", "skipped") else (8 if status == "passed" else 3) + i % 3
        batch.append(EvalRecord(
            id=f"bench-{i}", created_at=start + timedelta(milliseconds=i * 700), status=status,
            evaluator=("helpful", "polite")[i % 2], mode="numeric", threshold=7, score=score,
            passed=None if score is None else score >= 7, reason="the answer cites its source " * 4,
            agent_id=f"agent-{i % 10}", run_id=f"run-{i}", input="question text " * 10, output="answer text " * 30,
            latency_ms=150.0 + i % 50, sample_rate=1.0 if i % 4 else 0.5))
        if len(batch) == 5000:
            anyio.run(store.write, batch)
            batch = []
    if batch:
        anyio.run(store.write, batch)
    store.close()


def measured(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one fresh process."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{cmd} exited {proc.returncode}")
    return time.perf_counter() - started, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[20_000, 100_000])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        baseline = measured([sys.executable, "-c", "import judgehooks._cli"])
        for n in args.records:
            path = os.path.join(tmp, f"r{n}.db")
            fill(path, n)
            paged = measured([sys.executable, "-m", "judgehooks._cli", "report", "--store", path, "--since", "all",
                              "--json"])
            at_once = measured([sys.executable, "-c", ALL_AT_ONCE, path])
            rows.append([n, f"{paged[0]:.2f}", f"{paged[1]:.0f}", f"{at_once[0]:.2f}", f"{at_once[1]:.0f}",
                         f"{at_once[1] / paged[1]:.2f}x"])
    table(f"judgehooks report over N records (peak RSS of `import judgehooks._cli` alone: {baseline[1]:.0f} MB)",
          ["records", "report (paged) s", "paged peak MB", "all at once s", "all at once peak MB",
           "memory ratio"], rows)


if __name__ == "__main__":
    main()
