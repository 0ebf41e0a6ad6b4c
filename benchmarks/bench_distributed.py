"""Distributed grading benchmark: evaluations/s with one and two `judgehooks worker` processes
against a 200 ms judge, beside the in-process background dispatcher, and what `broker=` costs the
hook (the caller's path). Needs redis-server (Debian: apt-get install redis-server).

    python benchmarks/bench_distributed.py            # 600 evaluations per setup, 1,000 hook calls
    python benchmarks/bench_distributed.py --quick    # 200 and 200

agno has no distributed grading; its nearest equivalent, AgentAsJudgeEval(run_in_background=True),
is in the hook table. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import stub_server, table  # noqa: E402
from bench_background import CRITERIA, percentile, sample, timed  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("JUDGEHOOKS_JOB_KEY", "bench-job-signing-key-0123456789")  # producers sign, workers check

import redis  # noqa: E402
from agno.eval import AgentAsJudgeEval as AgnoEval  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks import AgentAsJudgeEval, SQLiteStore  # noqa: E402
from judgehooks.testing import RedisServer  # noqa: E402


def evaluator(base_url: str, tmp: str, name: str, broker: str | None, outbox: bool = True,
              **kw) -> AgentAsJudgeEval:
    return AgentAsJudgeEval(criteria=CRITERIA, name=name, model="openai/judge", api_base=base_url, api_key="bench",
                            store=SQLiteStore(f"{tmp}/{name}.db"), run_in_background=True, broker=broker,
                            outbox=(f"{tmp}/{name}.outbox.db" if outbox else False), **kw)


def hook_cost(base_url: str, broker: str, tmp: str, n: int) -> None:
    agent, run_output = sample(base_url)
    agno_eval = AgnoEval(criteria=CRITERIA, model=OpenAILike(id="judge", base_url=base_url, api_key="bench"),
                         telemetry=False, show_spinner=False, run_in_background=True)
    agno_times = [timed(lambda: agno_eval.post_check(run_output)) for _ in range(5)]
    rows = [["agno AgentAsJudgeEval(run_in_background=True)", 5, statistics.median(agno_times), max(agno_times),
             "-", "judged inline"]]
    setups = [("judgehooks background (in-process), outbox on", None, True),
              ("judgehooks broker=redis, outbox on", broker, True),
              ("judgehooks broker=redis, outbox off", broker, False)]
    for label, url, outbox in setups:
        ev = evaluator(base_url, tmp, f"hook-{len(rows)}", url, outbox, max_queue=100_000)
        for i in range(50):  # warm up: tables, connections
            run_output.run_id = f"warm-{len(rows)}-{i}"
            ev.post_check(run_output, agent=agent)
        judgehooks.drain(600)
        times = []
        start = time.perf_counter()
        for i in range(n):
            run_output.run_id = f"hook-{len(rows)}-{i}"
            t = time.perf_counter()
            ev.post_check(run_output, agent=agent)
            times.append((time.perf_counter() - t) * 1000)
        handoff = "judged in this process"
        if url is not None:
            judgehooks.drain(600)  # every job is in Redis now
            handoff = f"{n / (time.perf_counter() - start):,.0f} jobs/s into Redis"
        rows.append([label, n, statistics.median(times), percentile(times, 0.99), f"{percentile(times, 0.999):.2f}",
                     handoff])
    table("Hook cost per run (the post hook's own time, run(), burst), 200 ms judge, ms",
          ["evaluator", "runs", "median ms", "p99 ms (agno: max)", "p99.9 ms", "after the hook"], rows)
    print("\n(draining the in-process hook runs...)", flush=True)
    judgehooks.drain(600)


def start_workers(count: int, broker: str, db: str, concurrency: int, tmp: str,
                  base_url: str) -> list[subprocess.Popen]:
    env = {**os.environ, "OPENAI_API_KEY": "bench", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    procs = [subprocess.Popen([sys.executable, "-m", "judgehooks._cli", "worker", "--broker", broker, "--store",
                               f"sqlite:///{db}", "--concurrency", str(concurrency), "--name", f"bench-{i}",
                               "--rebuild", "AgentAsJudgeEval", "--judge-model", "openai/judge",
                               "--judge-api-base", base_url],
                              stdout=subprocess.PIPE, stderr=open(f"{tmp}/worker-{i}.err", "w"), text=True, env=env)
             for i in range(count)]
    for proc in procs:
        line = proc.stdout.readline()
        if "grading from" not in line:
            raise RuntimeError(f"worker did not start: {line!r}")
    return procs


def stop_workers(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.communicate(timeout=120)


def throughput(base_url: str, broker: str, tmp: str, n: int, concurrency: int) -> None:
    agent, run_output = sample(base_url)
    rows = []
    baseline = None
    for workers in (0, 1, 2):
        name = f"throughput-{workers}"
        redis.Redis.from_url(broker).flushdb()
        db = f"{tmp}/{name}.db"
        procs = start_workers(workers, broker, db, concurrency, tmp, base_url) if workers else []
        ev = evaluator(base_url, tmp, name, broker if workers else None, max_queue=n, max_concurrency=concurrency)
        if not workers:
            ev.judge.warm_up()
            time.sleep(5)  # let the judge process import litellm before the clock starts
        store = SQLiteStore(db)
        start = time.perf_counter()
        for i in range(n):
            run_output.run_id = f"{name}-{i}"
            ev.post_check(run_output, agent=agent)
        judgehooks.drain(3600)
        while len(store.query_sync(limit=None)) < n and time.perf_counter() - start < 3600:
            time.sleep(0.05)
        elapsed = time.perf_counter() - start
        records = store.query_sync(limit=None)
        if procs:
            stop_workers(procs)
        rate = n / elapsed
        baseline = baseline or rate
        label = (f"in-process background, 1 judge process, max_concurrency={concurrency}" if not workers else
                 f"{workers} judgehooks worker{'s' if workers > 1 else ''}, --concurrency {concurrency} each")
        rows.append([label, n, len(records), len({r.run_id for r in records}),
                     sum(r.status == "passed" for r in records), sum(r.status == "error" for r in records), elapsed,
                     rate, rate / baseline])
    table(f"{n:,} runs submitted at once, 200 ms judge, one SQLite store",
          ["setup", "evaluations", "stored", "unique runs", "passed", "errors", "seconds", "evals/s",
           "x in-process"], rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    print(f"judgehooks {judgehooks.__version__}; cores={os.cpu_count()}; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp, stub_server(200) as server, RedisServer() as rds:
        hook_cost(server.base_url, rds.url, tmp, 200 if args.quick else 1000)
        throughput(server.base_url, rds.url, tmp, 200 if args.quick else 600, args.concurrency)


if __name__ == "__main__":
    main()
