"""Background benchmark: what the hook costs the agent's caller, and sustained grading throughput.

    python benchmarks/bench_background.py            # full run (10,000 evaluations, a few minutes)
    python benchmarks/bench_background.py --quick    # 2,000 evaluations

Tables: added latency per run with a 500 ms judge (ours in background, with and without the
outbox, beside agno's own eval with run_in_background=True); sustained throughput, drops and RSS
growth for N runs against a 200 ms judge with max_concurrency=64. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent  # noqa: E402
from agno.eval import AgentAsJudgeEval as AgnoEval  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks import AgentAsJudgeEval, SQLiteStore  # noqa: E402

CRITERIA = "The answer echoes the question."


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ours(base_url: str, tmp: str, name: str, outbox: bool, **kw) -> AgentAsJudgeEval:
    return AgentAsJudgeEval(criteria=CRITERIA, name=name, model="openai/judge", api_base=base_url, api_key="bench",
                            store=SQLiteStore(f"{tmp}/{name}.db"), run_in_background=True,
                            outbox=(f"{tmp}/{name}.outbox.db" if outbox else False), **kw)


def sample(base_url: str):
    agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="bench"), id="bench-agent", telemetry=False)
    return agent, agent.run("What is the capital of France?")


def hook_latency(base_url: str, tmp: str, n: int) -> None:
    agent, run_output = sample(base_url)
    rows = []

    def timed_sync(evaluator, count: int, gap: float) -> list[float]:
        times = []
        for i in range(count):
            run_output.run_id = f"{evaluator.evaluator}-sync-{gap}-{i}"
            start = time.perf_counter()
            evaluator.post_check(run_output, agent=agent)
            times.append((time.perf_counter() - start) * 1000)
            time.sleep(gap)
        return times

    async def timed_async(evaluator, count: int, gap: float) -> list[float]:
        times = []
        for i in range(count):
            run_output.run_id = f"{evaluator.evaluator}-async-{gap}-{i}"
            start = time.perf_counter()
            await evaluator.async_post_check(run_output, agent=agent)
            times.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(gap)
        return times

    agno_eval = AgnoEval(criteria=CRITERIA, model=OpenAILike(id="judge", base_url=base_url, api_key="bench"),
                         telemetry=False, show_spinner=False, run_in_background=True)
    agno_times = [timed(lambda: agno_eval.post_check(run_output)) for _ in range(5)]
    rows.append(["agno AgentAsJudgeEval(run_in_background=True)", "one at a time", "run()", 5,
                 statistics.median(agno_times),
                 max(agno_times)])
    for outbox in (True, False):
        evaluator = ours(base_url, tmp, f"latency-outbox-{outbox}", outbox, max_queue=100_000)
        timed_sync(evaluator, 50, 0.0)  # warm up: judge processes, tables
        judgehooks.drain(60)
        label = f"judgehooks background, outbox {'on' if outbox else 'off'}"
        for gap, arrival in ((0.01, "100 runs/s"), (0.0, "burst")):
            sync = timed_sync(evaluator, n, gap)
            async_ = asyncio.run(timed_async(evaluator, n, gap))
            rows.append([label, arrival, "run()", n, statistics.median(sync), percentile(sync, 0.99)])
            rows.append([label, arrival, "arun()", n, statistics.median(async_), percentile(async_, 0.99)])
            judgehooks.drain(600)
    table("Added latency per run (the post hook's own time), 500 ms judge, ms",
          ["evaluator", "arrivals", "path", "runs", "median ms", "p99 ms (agno: max)"], rows)
    print("\n(draining the latency runs...)", flush=True)
    judgehooks.drain(600)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def throughput(base_url: str, tmp: str, n: int) -> None:
    agent, run_output = sample(base_url)
    rows = []
    for processes in (1, 2):
        evaluator = ours(base_url, tmp, f"throughput-{processes}", True, max_concurrency=64, max_queue=n,
                         judge_processes=processes)
        evaluator.judge.warm_up()
        time.sleep(5)  # let the judge process import litellm before the clock starts
        rss_before = rss_mb()
        start = time.perf_counter()
        submit_ms = []
        for i in range(n):
            run_output.run_id = f"throughput-{processes}-{i}"
            t = time.perf_counter()
            evaluator.post_check(run_output, agent=agent)
            submit_ms.append((time.perf_counter() - t) * 1000)
        rss_peak = rss_mb()
        judgehooks.drain(3600)
        elapsed = time.perf_counter() - start
        stats = evaluator.stats()
        stored = len(evaluator.store.query_sync(evaluator=evaluator.evaluator, limit=None))
        rows.append([processes, n, stored, stats["passed"], stats["errors"], stats["dropped"], n - stored, elapsed,
                     n / elapsed, statistics.median(submit_ms),
                     f"{rss_peak - rss_before:.0f} / {rss_mb() - rss_before:.0f}"])
    table(f"{n:,} runs submitted at once, 200 ms judge, max_concurrency=64, outbox on",
          ["judge processes", "evaluations", "stored", "passed", "errors", "dropped", "lost", "seconds", "evals/s",
           "submit median ms", "parent RSS growth MB (peak/after)"], rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--latency-only", action="store_true")
    args = parser.parse_args()
    print(f"judgehooks {judgehooks.__version__}; cores={os.cpu_count()}; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp, stub_server(500) as server:
        hook_latency(server.base_url, tmp, 200 if args.quick else 1000)
    if args.latency_only:
        return
    with tempfile.TemporaryDirectory() as tmp, stub_server(200) as server:
        throughput(server.base_url, tmp, 2000 if args.quick else 10_000)


if __name__ == "__main__":
    main()
