"""Background benchmark: what the hook costs the agent's caller, and sustained grading throughput.

    python benchmarks/bench_background.py            # full run: 3 repeats, 10,000 evaluations each (~15 min)
    python benchmarks/bench_background.py --quick    # 2,000 evaluations per repeat

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
from _common import spread, stub_server, table  # noqa: E402

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


def hook_latency(base_url: str, tmp: str, n: int, repeats: int) -> None:
    agent, run_output = sample(base_url)
    rows = []

    def timed_sync(evaluator, count: int, gap: float) -> list[float]:
        times = []
        for i in range(count):
            run_output.run_id = f"{evaluator.evaluator}-sync-{gap}-{i}-{time.monotonic_ns()}"
            start = time.perf_counter()
            evaluator.post_check(run_output, agent=agent)
            times.append((time.perf_counter() - start) * 1000)
            time.sleep(gap)
        return times

    async def timed_async(evaluator, count: int, gap: float) -> list[float]:
        times = []
        for i in range(count):
            run_output.run_id = f"{evaluator.evaluator}-async-{gap}-{i}-{time.monotonic_ns()}"
            start = time.perf_counter()
            await evaluator.async_post_check(run_output, agent=agent)
            times.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(gap)
        return times

    agno_eval = AgnoEval(criteria=CRITERIA, model=OpenAILike(id="judge", base_url=base_url, api_key="bench"),
                         telemetry=False, show_spinner=False, run_in_background=True)
    agno_times = [timed(lambda: agno_eval.post_check(run_output)) for _ in range(3 * repeats)]
    rows.append(["agno AgentAsJudgeEval(run_in_background=True)", "one at a time", "run()", 3 * repeats,
                 *spread(agno_times), max(agno_times)])
    for outbox in (True, False):
        evaluator = ours(base_url, tmp, f"latency-outbox-{outbox}", outbox, max_queue=100_000)
        timed_sync(evaluator, 50, 0.0)  # warm up: judge processes, tables
        judgehooks.drain(60)
        label = f"judgehooks background, outbox {'on' if outbox else 'off'}"
        for gap, arrival in ((0.01, "100 runs/s"), (0.0, "burst")):
            sync, async_ = [], []
            for _ in range(repeats):
                sync.append(timed_sync(evaluator, n, gap))
                async_.append(asyncio.run(timed_async(evaluator, n, gap)))
                judgehooks.drain(600)
            for path, runs in (("run()", sync), ("arun()", async_)):
                rows.append([label, arrival, path, n, *spread([statistics.median(r) for r in runs]),
                             max(percentile(r, 0.99) for r in runs)])
    table(f"Added latency per run (the post hook's own time), 500 ms judge, ms ({repeats} repeats: the median "
          "of each repeat's median, their range, the worst repeat's p99)",
          ["evaluator", "arrivals", "path", "runs/repeat", "median ms", "range", "p99 ms (agno: max)"], rows)
    print("\n(draining the latency runs...)", flush=True)
    judgehooks.drain(600)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def throughput(base_url: str, tmp: str, n: int, repeats: int) -> None:
    agent, run_output = sample(base_url)
    rows = []
    for processes in (0, 1, 2):
        rates, lost, submit, rss = [], 0, [], []
        counts = {"passed": 0, "errors": 0, "dropped": 0}
        for r in range(repeats):
            name = f"throughput-{processes}-{r}"
            evaluator = ours(base_url, tmp, name, True, max_concurrency=64, max_queue=n,
                             judge_process=processes > 0, judge_processes=processes or None)
            evaluator.judge.warm_up()
            time.sleep(5)  # let the judge process import litellm before the clock starts
            rss_before = rss_mb()
            start = time.perf_counter()
            submit_ms = []
            for i in range(n):
                run_output.run_id = f"{name}-{i}"
                t = time.perf_counter()
                evaluator.post_check(run_output, agent=agent)
                submit_ms.append((time.perf_counter() - t) * 1000)
            rss_peak = rss_mb()
            judgehooks.drain(3600)
            rates.append(n / (time.perf_counter() - start))
            stats = evaluator.stats()
            for key in counts:
                counts[key] += stats[key]
            lost += n - len(evaluator.store.query_sync(evaluator=evaluator.evaluator, limit=None))
            submit.append(statistics.median(submit_ms))
            rss.append(f"{rss_peak - rss_before:.0f}/{rss_mb() - rss_before:.0f}")
        rows.append([processes or "none (in-process)", n, counts["passed"], counts["errors"], counts["dropped"], lost,
                     *spread(rates), statistics.median(submit), " ".join(rss)])
    table(f"{n:,} runs submitted at once, 200 ms judge, max_concurrency=64, outbox on ({repeats} repeats; "
          "counts summed over the repeats)",
          ["judge processes", "evaluations/repeat", "passed", "errors", "dropped", "lost", "median evals/s", "range",
           "submit median ms", "parent RSS growth MB (peak/after) per repeat"], rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--latency-only", action="store_true")
    parser.add_argument("--throughput-only", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"judgehooks {judgehooks.__version__}; cores={os.cpu_count()}; python {sys.version.split()[0]}")
    if not args.throughput_only:
        with tempfile.TemporaryDirectory() as tmp, stub_server(500) as server:
            hook_latency(server.base_url, tmp, 100 if args.quick else 300, args.repeats)
    if args.latency_only:
        return
    with tempfile.TemporaryDirectory() as tmp, stub_server(200) as server:
        throughput(server.base_url, tmp, 2000 if args.quick else 10_000, args.repeats)


if __name__ == "__main__":
    main()
