"""Every peer in one run: agno's AgentAsJudgeEval, pydantic-evals' online evaluation and judgehooks,
each grading with an LLM judge on the same loopback server (a separate process).

    python benchmarks/bench_peers.py            # 3 repeats per row (~6 minutes)
    python benchmarks/bench_peers.py --quick    # fewer runs per repeat

Tables (median of the repeats, and their range):
1. the latency the hook adds to each run, background mode, 500 ms judge;
2. the sustained grading rate at a 200 ms judge with 64 evaluations in flight;
3. what is lost when a burst overloads the default settings, and when the process exits with
   evaluations still pending (child processes that simply return from main).

pydantic-evals' design is the decorator `OnlineEvaluator`: the wrapped function returns at once and its
evaluators run as tasks on the caller's loop (or a background thread when there is none), at most
`max_concurrency` at a time (default 10); beyond that an evaluation is dropped, silently unless
`on_max_concurrency` is set. agno grades inline outside AgentOS (`run_in_background=True` is a FastAPI
background task there), so the caller waits for the judge. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from _common import spread, stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent  # noqa: E402
from agno.db.sqlite import SqliteDb  # noqa: E402
from agno.eval import AgentAsJudgeEval as AgnoEval  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks import AgentAsJudgeEval, SQLiteStore  # noqa: E402
from judgehooks._grading.journal import pending_counts  # noqa: E402

CRITERIA = "The answer echoes the question."


# ---- the three ways to grade a run ------------------------------------------------------------------

def agno_eval(base_url: str, **kw: Any) -> AgnoEval:
    return AgnoEval(criteria=CRITERIA, model=OpenAILike(id="judge", base_url=base_url, api_key="bench"),
                    telemetry=False, show_spinner=False, **kw)


def ours(base_url: str, tmp: str, name: str, **kw: Any) -> AgentAsJudgeEval:
    kw.setdefault("outbox", f"{tmp}/{name}.outbox.db")
    return AgentAsJudgeEval(criteria=CRITERIA, name=name, model="openai/judge", api_base=base_url, api_key="bench",
                            store=SQLiteStore(f"{tmp}/{name}.db"), run_in_background=True, **kw)


def pydantic_evals_judge(base_url: str) -> Any:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_evals.evaluators import LLMJudge

    model = OpenAIChatModel("judge", provider=OpenAIProvider(base_url=base_url, api_key="bench"))
    return LLMJudge(rubric=CRITERIA, model=model, include_input=True)


def pydantic_evals_wrap(base_url: str, fn: Callable[..., Any], sink: Callable[..., None], *,
                        max_concurrency: int | None = None, on_drop: Callable[..., None] | None = None) -> Any:
    """`fn` wrapped with pydantic-evals' online evaluation: its LLMJudge on the stub; `sink` sees each result."""
    from pydantic_evals.online import OnlineEvalConfig, OnlineEvaluator

    config = OnlineEvalConfig(default_sink=sink, emit_otel_events=False)
    options: dict[str, Any] = {} if max_concurrency is None else {"max_concurrency": max_concurrency}
    if on_drop is not None:
        options["on_max_concurrency"] = on_drop
    return config.evaluate(OnlineEvaluator(evaluator=pydantic_evals_judge(base_url), **options))(fn)


def sample(base_url: str) -> tuple[Agent, Any]:
    agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="bench"), id="bench-agent",
                  telemetry=False)
    return agent, agent.run("What is the capital of France?")


# ---- 1. added latency per run --------------------------------------------------------------------------

def hook_ms(evaluator: AgentAsJudgeEval, agent: Agent, run_output: Any, tag: str, n: int) -> float:
    """The median ms `run()`'s post hook takes, over `n` runs at 100 runs/s."""
    added = []
    for i in range(n):
        run_output.run_id = f"{tag}-{i}"
        added.append(_ms(lambda: evaluator.post_check(run_output, agent=agent)))
        time.sleep(0.01)
    return statistics.median(added)


async def async_hook_ms(evaluator: AgentAsJudgeEval, agent: Agent, run_output: Any, tag: str, n: int) -> float:
    """The same for `arun()`'s post hook."""
    added = []
    for i in range(n):
        run_output.run_id = f"{tag}-{i}"
        start = time.perf_counter()
        await evaluator.async_post_check(run_output, agent=agent)
        added.append((time.perf_counter() - start) * 1000)
        await asyncio.sleep(0.01)
    return statistics.median(added)


def added_latency(base_url: str, tmp: str, n: int, repeats: int) -> None:
    agent, run_output = sample(base_url)
    answer = str(run_output.content)
    rows: list[list[object]] = []

    agno = agno_eval(base_url, run_in_background=True)
    agno_times = [_ms(lambda: agno.post_check(run_output)) for _ in range(3 * repeats)]
    rows.append(["agno AgentAsJudgeEval(run_in_background=True)", "run()", 3 * repeats, *spread(agno_times)])

    async def plain(question: str) -> str:
        return answer

    def plain_sync(question: str) -> str:
        return answer

    done: list[int] = []
    wrapped = pydantic_evals_wrap(base_url, plain, lambda *a: done.append(1), max_concurrency=64)
    wrapped_sync = pydantic_evals_wrap(base_url, plain_sync, lambda *a: done.append(1), max_concurrency=64)

    async def pe_async() -> list[float]:
        medians = []
        for _ in range(repeats):
            added = []
            for i in range(n):
                start = time.perf_counter()
                await wrapped(f"q{i}")
                wrapped_ms = (time.perf_counter() - start) * 1000
                start = time.perf_counter()
                await plain(f"q{i}")
                added.append(wrapped_ms - (time.perf_counter() - start) * 1000)
                await asyncio.sleep(0.01)  # 100 runs/s: 50 evaluations in flight, under its limit of 64
            medians.append(statistics.median(added))
            await asyncio.sleep(1.0)
        return medians

    rows.append(["pydantic-evals OnlineEvaluator(max_concurrency=64)", "async fn", n, *spread(asyncio.run(pe_async()))])
    medians = []
    for _ in range(repeats):
        added = []
        for i in range(n):
            added.append(_ms(lambda i=i: wrapped_sync(f"q{i}")) - _ms(lambda i=i: plain_sync(f"q{i}")))
            time.sleep(0.01)
        medians.append(statistics.median(added))
        time.sleep(1.0)
    rows.append(["pydantic-evals OnlineEvaluator(max_concurrency=64)", "sync fn", n, *spread(medians)])

    def warmed(name: str, **kw: Any) -> AgentAsJudgeEval:
        evaluator = ours(base_url, tmp, name, max_concurrency=64, **kw)
        for i in range(50):  # warm up: tables, the judge client
            run_output.run_id = f"warm-{name}-{i}"
            evaluator.post_check(run_output, agent=agent)
        judgehooks.drain(120)
        return evaluator

    evaluator = warmed("latency")
    sync_medians, async_medians = [], []
    for r in range(repeats):
        sync_medians.append(hook_ms(evaluator, agent, run_output, f"sync-{r}", n))
        async_medians.append(asyncio.run(async_hook_ms(evaluator, agent, run_output, f"async-{r}", n)))
        judgehooks.drain(600)
    off = warmed("latency-off", outbox=False)
    off_medians = []
    for r in range(repeats):
        off_medians.append(hook_ms(off, agent, run_output, f"off-{r}", n))
        judgehooks.drain(600)
    rows.append(["judgehooks AgentAsJudgeEval(run_in_background=True), outbox on", "arun()", n,
                 *spread(async_medians)])
    rows.append(["judgehooks AgentAsJudgeEval(run_in_background=True), outbox on", "run()", n,
                 *spread(sync_medians)])
    rows.append(["judgehooks AgentAsJudgeEval(run_in_background=True), outbox=False", "run()", n,
                 *spread(off_medians)])
    table(f"Added latency per run, 500 ms judge, 100 runs/s (median ms per repeat; {repeats} repeats)",
          ["evaluator", "path", "runs/repeat", "median ms", "range ms"], rows)


# ---- 2. sustained rate with 64 in flight -------------------------------------------------------------

async def agno_rate(base_url: str, tmp: str, n: int, in_flight: int = 64) -> float:
    agent, run_output = sample(base_url)
    evaluator = agno_eval(base_url, db=SqliteDb(db_file=f"{tmp}/agno-rate.db"))
    queue = iter(range(n))

    async def worker() -> None:
        for _ in queue:
            await evaluator.async_post_check(run_output)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return n / (time.perf_counter() - start)


async def pydantic_evals_rate(base_url: str, n: int, in_flight: int = 64) -> float:
    """`in_flight` evaluations at a time: a slot is taken before each call and given back by the sink."""
    slots = asyncio.Semaphore(in_flight)
    finished = asyncio.Event()
    count = [0]
    loop = asyncio.get_running_loop()

    def sink(*args: Any) -> None:
        def give_back() -> None:
            count[0] += 1
            slots.release()
            if count[0] == n:
                finished.set()
        loop.call_soon_threadsafe(give_back)

    async def plain(question: str) -> str:
        return "ECHO: " + question

    wrapped = pydantic_evals_wrap(base_url, plain, sink, max_concurrency=in_flight)
    start = time.perf_counter()
    for i in range(n):
        await slots.acquire()
        await wrapped(f"q{i}")
    await finished.wait()
    return n / (time.perf_counter() - start)


def ours_rate(base_url: str, tmp: str, n: int, name: str, **kw: Any) -> tuple[float, int]:
    agent, run_output = sample(base_url)
    evaluator = ours(base_url, tmp, name, max_concurrency=64, max_queue=n, **kw)
    evaluator.judge.warm_up()
    start = time.perf_counter()
    for i in range(n):
        run_output.run_id = f"{name}-{i}"
        evaluator.post_check(run_output, agent=agent)
    judgehooks.drain(3600)
    elapsed = time.perf_counter() - start
    stored = len(evaluator.store.query_sync(evaluator=evaluator.evaluator, limit=None))
    return n / elapsed, n - stored


def sustained(base_url: str, tmp: str, n: int, repeats: int) -> None:
    rows: list[list[object]] = []
    agno = [asyncio.run(agno_rate(base_url, tmp, n)) for _ in range(repeats)]
    pe = [asyncio.run(pydantic_evals_rate(base_url, n)) for _ in range(repeats)]
    inproc = [ours_rate(base_url, tmp, n, f"rate-in-{r}", judge_process=False) for r in range(repeats)]
    process = [ours_rate(base_url, tmp, n, f"rate-proc-{r}", judge_processes=1) for r in range(repeats)]
    rows.append(["agno AgentAsJudgeEval, 64 concurrent async_post_check", n, *spread(agno), 0])
    rows.append(["pydantic-evals OnlineEvaluator(max_concurrency=64)", n, *spread(pe), 0])
    rows.append(["judgehooks background, max_concurrency=64, judge in-process", n, *spread([r for r, _ in inproc]),
                 sum(lost for _, lost in inproc)])
    rows.append(["judgehooks background, max_concurrency=64, 1 judge process", n,
                 *spread([r for r, _ in process]), sum(lost for _, lost in process)])
    base = statistics.median(agno)
    for row in rows:
        row.insert(4, f"{float(row[2]) / base:.1f}x")  # type: ignore[arg-type]
    table(f"Sustained rate, 200 ms judge, 64 in flight (evals/s; {repeats} repeats)",
          ["evaluator", "evaluations/repeat", "median evals/s", "range", "x agno", "lost (all repeats)"], rows)


# ---- 3. loss at overload and at exit -----------------------------------------------------------------

async def agno_burst(base_url: str, tmp: str, n: int) -> tuple[int, int, str]:
    _, run_output = sample(base_url)
    db = SqliteDb(db_file=f"{tmp}/agno-burst.db")
    evaluator = agno_eval(base_url, db=db)
    start = time.perf_counter()
    await asyncio.gather(*(evaluator.async_post_check(run_output) for _ in range(n)))
    waited = time.perf_counter() - start
    return len(db.get_eval_runs() or []), 0, f"callers waited for the judge ({waited:.1f} s for the burst)"


async def pydantic_evals_burst(base_url: str, n: int) -> tuple[int, int, str]:
    graded, dropped = [0], [0]

    async def plain(question: str) -> str:
        return "ECHO: " + question

    wrapped = pydantic_evals_wrap(base_url, plain, lambda *a: graded.__setitem__(0, graded[0] + 1),
                                  on_drop=lambda *a: dropped.__setitem__(0, dropped[0] + 1))
    for i in range(n):
        await wrapped(f"q{i}")
    from pydantic_evals.online import wait_for_evaluations

    await wait_for_evaluations()
    await asyncio.sleep(0.5)
    return graded[0], 0, (f"default max_concurrency=10: {dropped[0]} dropped, counted here through "
                          "on_max_concurrency; silent by default")


def ours_burst(base_url: str, tmp: str, n: int) -> tuple[int, int, str]:
    agent, run_output = sample(base_url)
    evaluator = ours(base_url, tmp, "burst")  # the defaults
    for i in range(n):
        run_output.run_id = f"burst-{i}"
        evaluator.post_check(run_output, agent=agent)
    judgehooks.drain(600)
    records = evaluator.store.query_sync(evaluator=evaluator.evaluator, limit=None)
    graded = sum(1 for r in records if r.status in ("passed", "failed"))
    return graded, len(records) - graded, "defaults: max_queue=10,000, outbox on; anything shed is a skipped record"


_EXIT_CHILD = {
    "pydantic-evals": '''
import asyncio, os, sys
sys.path.insert(0, {bench!r})
from bench_peers import pydantic_evals_wrap
out = open({out!r}, "a")
async def plain(question: str) -> str:
    return "ECHO: " + question
wrapped = pydantic_evals_wrap({base!r}, plain, lambda *a: (out.write("x\\n"), out.flush()), max_concurrency=64)
async def main():
    for i in range({n}):
        await wrapped(f"q{{i}}")
asyncio.run(main())  # returns with evaluations pending, as a service does at shutdown
''',
    "judgehooks": '''
import os, sys
sys.path.insert(0, {bench!r})
from bench_peers import ours, sample
agent, run_output = sample({base!r})
evaluator = ours({base!r}, {tmp!r}, "exit", max_concurrency=64)
for i in range({n}):
    run_output.run_id = f"exit-{{i}}"
    evaluator.post_check(run_output, agent=agent)
''',
}


def at_exit(base_url: str, tmp: str, n: int, which: str) -> tuple[int, int, str]:
    out = f"{tmp}/{which}-exit.txt"
    code = _EXIT_CHILD[which].format(bench=os.path.dirname(os.path.abspath(__file__)), out=out, base=base_url, n=n,
                                     tmp=tmp)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    took = time.perf_counter() - start
    if which == "pydantic-evals":
        graded = sum(1 for _ in open(out)) if os.path.exists(out) else 0
        return graded, 0, f"exit took {took:.1f} s"
    stored = sqlite3.connect(f"{tmp}/exit.db").execute("SELECT COUNT(*) FROM eval_records").fetchone()[0]
    kept = sum(pending_counts(sqlite3.connect(f"{tmp}/exit.outbox.db")).values())
    return stored, kept, f"exit took {took:.1f} s; {kept} kept in the outbox for `judgehooks resume`"


def losses(base_url: str, tmp: str, burst: int, pending: int) -> None:
    rows: list[list[object]] = []
    for label, (graded, other, note) in (
            ("agno AgentAsJudgeEval (inline)", asyncio.run(agno_burst(base_url, tmp, burst))),
            ("pydantic-evals OnlineEvaluator", asyncio.run(pydantic_evals_burst(base_url, burst))),
            ("judgehooks background", ours_burst(base_url, tmp, burst))):
        rows.append([label, f"burst of {burst}", graded, other, burst - graded - other, note])
    rows.append(["agno AgentAsJudgeEval (inline)", f"exit, {pending} pending", "-", "-", 0,
                 "nothing is pending: every caller waited for its verdict"])
    for label, which in (("pydantic-evals OnlineEvaluator", "pydantic-evals"), ("judgehooks background", "judgehooks")):
        graded, kept, note = at_exit(base_url, tmp, pending, which)
        rows.append([label, f"exit, {pending} pending", graded, kept, pending - graded - kept, note])
    table("Lost at overload and at exit, 200 ms judge",
          ["evaluator", "situation", "graded", "dropped with a record / kept", "lost silently", "notes"], rows)


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from importlib.metadata import version

    print(f"judgehooks {judgehooks.__version__}, agno {version('agno')}, pydantic-evals {version('pydantic-evals')}; "
          f"cores={os.cpu_count()}; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        with stub_server(500) as server:
            added_latency(server.base_url, tmp, 100 if args.quick else 300, args.repeats)
        with stub_server(200) as server:
            sustained(server.base_url, tmp, 500 if args.quick else 2000, args.repeats)
            losses(server.base_url, tmp, 1000, 200)
    print(json.dumps({"done": True}))


if __name__ == "__main__":
    main()
