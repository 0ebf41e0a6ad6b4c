"""Idle benchmark: what a process with background evaluators costs while nothing is graded.

    python benchmarks/bench_idle.py            # 3 repeats per row (~2 min)
    python benchmarks/bench_idle.py --quick    # 1 repeat

A service is idle most of the time. Each row is a fresh process that builds `k` evaluators (1 and
10), grades one run through each, waits until every verdict is stored, lets everything settle for
2 s, then reads its own CPU time over 3 s of doing nothing. The same for agno (its
`AgentAsJudgeEval` as a post-hook, `db=` a SQLite file) and pydantic-evals (an `OnlineEvaluator`
wrapping a function): the process's CPU per second of idling, all threads. A timer that wakes an
idle thread costs CPU on its own; on a VM ~0.1-0.3 ms a wake-up.
Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))

from _charts import strip_chart  # noqa: E402
from _common import spread, stub_server, table  # noqa: E402

SETTLE_S, IDLE_S = 2.0, 3.0


def _idle_ms_per_s() -> float:
    time.sleep(SETTLE_S)
    cpu = time.process_time()
    time.sleep(IDLE_S)
    return (time.process_time() - cpu) * 1000 / IDLE_S


def child_ours(base_url: str, tmp: str, k: int) -> float:
    from bench_peers import ours, sample

    import judgehooks

    agent, run_output = sample(base_url)
    evaluators = [ours(base_url, tmp, f"idle-{i}") for i in range(k)]
    for evaluator in evaluators:
        evaluator.post_check(run_output, agent=agent)
    assert judgehooks.drain(60)
    return _idle_ms_per_s()


def child_agno(base_url: str, tmp: str, k: int) -> float:
    from agno.db.sqlite import SqliteDb
    from bench_peers import agno_eval, sample

    _, run_output = sample(base_url)
    evaluators = [agno_eval(base_url, db=SqliteDb(db_file=f"{tmp}/agno-idle.db")) for _ in range(k)]
    for evaluator in evaluators:
        evaluator.post_check(run_output)
    return _idle_ms_per_s()


def child_pydantic_evals(base_url: str, tmp: str, k: int) -> float:
    import asyncio

    from bench_peers import pydantic_evals_wrap

    done = threading.Semaphore(0)

    async def plain(question: str) -> str:
        return "ECHO: " + question

    async def run() -> None:
        wrapped = [pydantic_evals_wrap(base_url, plain, lambda *_: done.release()) for _ in range(k)]
        for fn in wrapped:
            await fn("What is the capital of France?")
        for _ in range(k):
            while not done.acquire(blocking=False):
                await asyncio.sleep(0.01)

    asyncio.run(run())
    return _idle_ms_per_s()


CHILDREN: dict[str, Any] = {"judgehooks": child_ours, "agno": child_agno, "pydantic-evals": child_pydantic_evals}


def _child(kind: str, base_url: str, tmp: str, k: int) -> float:
    out = subprocess.run([sys.executable, HERE, "--child", kind, base_url, tmp, str(k)], check=True,
                         capture_output=True, text=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, base_url, tmp, k = sys.argv[2:6]
        print(json.dumps(CHILDREN[kind](base_url, tmp, int(k))), flush=True)
        os._exit(0)
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import judgehooks

    repeats = 1 if args.quick else args.repeats
    print(f"judgehooks {judgehooks.__version__}; cores={os.cpu_count()}; python {sys.version.split()[0]}")
    got: dict[tuple[str, int], list[float]] = {(kind, k): [] for k in (1, 10) for kind in CHILDREN}
    with tempfile.TemporaryDirectory() as tmp, stub_server(0) as server:
        for r in range(repeats):
            for kind, k in got:  # interleaved: a busy moment falls on every row alike
                got[kind, k].append(_child(kind, server.base_url, f"{tmp}", k))
                print(f"({kind}, {k} evaluator(s), repeat {r + 1}: {got[kind, k][-1]:.2f} ms/s)", flush=True)
    rows = [[f"{kind}, {k} evaluator{'s' if k > 1 else ''}", *spread(values)] for (kind, k), values in got.items()]
    table(f"Idle process CPU after one evaluation per evaluator, ms per second of idling (fresh process each; "
          f"{repeats} repeat(s); {IDLE_S:g} s read after {SETTLE_S:g} s settling; lower is better)",
          ["process", "median CPU ms/s", "range"], rows)
    strip_chart("idle-cpu", "Idle process CPU after one evaluation per evaluator", "CPU ms per second, lower is "
                "better", {f"{kind}, {k} evaluator{'s' if k > 1 else ''}": values for (kind, k), values in got.items()})


if __name__ == "__main__":
    main()
