"""Core benchmark: judgehooks beside agno's own AgentAsJudgeEval, same stub server, same run.

    python benchmarks/bench_core.py            # full run (~2 minutes)
    python benchmarks/bench_core.py --quick    # fewer iterations

Prints four tables: client CPU per inline evaluation (0 ms judge), offline batch throughput
(100 ms judge), attribution under 50 concurrent runs, and import time. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import cpu_ms_per_call, stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent  # noqa: E402
from agno.db.sqlite import SqliteDb  # noqa: E402
from agno.eval import AgentAsJudgeEval as AgnoEval  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks import (  # noqa: E402
    AgentAsJudgeEval,
    MemoryStore,
    SQLiteStore,
)
from judgehooks._runtime import runtime  # noqa: E402
from judgehooks.testing import FakeJudge  # noqa: E402

CRITERIA = "The answer echoes the question."


def model(base_url: str, model_id: str = "agent") -> OpenAILike:
    return OpenAILike(id=model_id, base_url=base_url, api_key="bench")


def ours(base_url: str, **kw) -> AgentAsJudgeEval:
    kw.setdefault("store", MemoryStore())
    return AgentAsJudgeEval(criteria=CRITERIA, model="openai/judge", api_base=base_url, api_key="bench", **kw)


def agnos(base_url: str, **kw) -> AgnoEval:
    return AgnoEval(criteria=CRITERIA, model=model(base_url, "judge"), telemetry=False, **kw)


def sample_run_output(base_url: str):
    agent = Agent(model=model(base_url), id="bench-agent", telemetry=False)
    return agent, agent.run("What is the capital of France?")


def cpu_table(base_url: str, n: int, tmp: str) -> None:
    agent, run_output = sample_run_output(base_url)
    counter = iter(range(10**9))

    def hook(evaluator):
        def call():
            run_output.run_id = f"run-{next(counter)}"
            evaluator.post_check(run_output, agent=agent)
        return call

    def agno_hook(evaluator):
        return lambda: evaluator.post_check(run_output)

    candidates = {
        "agno AgentAsJudgeEval, no db": agno_hook(agnos(base_url)),
        "agno AgentAsJudgeEval, SqliteDb": agno_hook(agnos(base_url, db=SqliteDb(db_file=f"{tmp}/agno.db"))),
        "judgehooks, MemoryStore": hook(ours(base_url)),
        "judgehooks, SQLiteStore": hook(ours(base_url, store=SQLiteStore(f"{tmp}/ours.db"))),
        "judgehooks overhead only (FakeJudge, SQLiteStore)": hook(AgentAsJudgeEval(
            criteria=CRITERIA, judge=FakeJudge('{"passed": true, "reason": "ok"}'),
            store=SQLiteStore(f"{tmp}/fake.db"))),
    }
    # The judge client call alone, on the judgehooks loop: litellm's share of our total.
    judge = ours(base_url)
    request = judge._call.request(judgehooks.EvalContext(input="What is the capital of France?",
                                                     output=str(run_output.content)))

    async def judge_calls(k: int) -> None:
        for _ in range(k):
            await judge.judge.complete(request)

    rows = []
    for label, fn in candidates.items():
        for _ in range(20):
            fn()  # warm up: imports, connections, tables
        rows.append([label, cpu_ms_per_call(fn, n)])
    runtime.call(judge_calls, 20)
    start = time.process_time()
    runtime.call(judge_calls, n)
    litellm_ms = (time.process_time() - start) * 1000 / n
    rows.append(["litellm acompletion alone (judge client call)", litellm_ms])
    sqlite_total = rows[3][1]
    rows.append(["judgehooks own overhead = SQLite total - client call", sqlite_total - litellm_ms])
    table(f"Client CPU per inline evaluation, 0 ms judge (ms, n={n}, lower is better)",
          ["path", "CPU ms / evaluation"], rows)


async def batch_rates(base_url: str, n_cases: int) -> list[list[object]]:
    cases = [{"input": f"question {i}", "output": f"answer {i}"} for i in range(n_cases)]
    rows = []
    agno_eval = agnos(base_url, show_spinner=False)
    start = time.perf_counter()
    result = await agno_eval.arun(cases=cases)
    agno_s = time.perf_counter() - start
    rows.append(["agno AgentAsJudgeEval.arun", n_cases, len(result.results), agno_s, n_cases / agno_s, 1.0])
    for concurrency, in_process in ((32, True), (64, True), (64, False)):
        evaluator = ours(base_url, max_concurrency=concurrency, judge_process=not in_process,
                         judge_processes=None if in_process else 2)
        await evaluator.arun(cases=cases[:20])  # warm up (and start the judge processes)
        start = time.perf_counter()
        result = await evaluator.arun(cases=cases)
        s = time.perf_counter() - start
        where = "litellm in-process" if in_process else "litellm in 2 judge processes"
        rows.append([f"judgehooks arun, max_concurrency={concurrency}, {where}", n_cases, result.graded_count, s,
                     n_cases / s, (n_cases / s) / (n_cases / agno_s)])
    return rows


async def concurrent_attribution(base_url: str, tmp: str, runs: int) -> list[list[object]]:
    rows = []
    db = SqliteDb(db_file=f"{tmp}/agno-concurrent.db")
    agno_agent = Agent(model=model(base_url), id="agno-agent", telemetry=False,
                       post_hooks=[agnos(base_url, db=db, show_spinner=False)])
    await asyncio.gather(*(agno_agent.arun(f"q{i}") for i in range(runs)))
    stored = db.get_eval_runs() or []
    attributed = sum(1 for r in stored if r.agent_id == "agno-agent")
    rows.append(["agno AgentAsJudgeEval", runs, len(stored), attributed])
    store = SQLiteStore(f"{tmp}/ours-concurrent.db")
    our_agent = Agent(model=model(base_url), id="our-agent", telemetry=False, post_hooks=[ours(base_url, store=store)])
    outs = await asyncio.gather(*(our_agent.arun(f"q{i}") for i in range(runs)))
    records = store.query_sync(limit=None)
    by_run = {r.run_id: r for r in records}
    ok = sum(1 for o in outs if o.run_id in by_run and by_run[o.run_id].agent_id == "our-agent"
             and by_run[o.run_id].input == f"q{outs.index(o)}")
    rows.append(["judgehooks AgentAsJudgeEval", runs, len(records), ok])
    return rows


def import_times(repeats: int) -> None:
    def best(code: str) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - start)
        return min(times) * 1000

    base = best("pass")
    agno_ms = best("import agno.eval.base")
    ours_ms = best("import judgehooks")
    litellm_ms = best("import os; os.environ['LITELLM_LOCAL_MODEL_COST_MAP']='True'; import litellm")
    table(f"Import time, wall ms (best of {repeats}, interpreter start {base:.0f} ms subtracted)",
          ["import", "ms", "vs agno.eval.base"],
          [["agno.eval.base", agno_ms - base, 0.0], ["judgehooks", ours_ms - base, ours_ms - agno_ms],
           ["litellm (deferred to first judge call)", litellm_ms - base, litellm_ms - agno_ms]])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 100 if args.quick else 300
    print(f"judgehooks {judgehooks.__version__} benchmark; cores={os.cpu_count()}; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp, stub_server(0) as server:
        cpu_table(server.base_url, n, tmp)
        server.configure(judge_delay_ms=100)
        rows = asyncio.run(batch_rates(server.base_url, 200))
        table("Offline batch, 200 cases, 100 ms judge", ["evaluator", "cases", "graded", "seconds", "evals/s",
                                                          "x agno"], rows)
        rows = asyncio.run(concurrent_attribution(server.base_url, tmp, 50))
        table("50 concurrent arun() sharing one eval, 100 ms judge", ["evaluator", "runs", "stored", "attributed"],
              rows)
    import_times(3 if args.quick else 5)


if __name__ == "__main__":
    main()
