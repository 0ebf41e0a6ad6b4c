"""Core benchmark: judgehooks beside agno's own AgentAsJudgeEval, same stub server, same run.

    python benchmarks/bench_core.py            # full run, 3 repeats per row (~6 minutes)
    python benchmarks/bench_core.py --quick    # fewer iterations per repeat

    python benchmarks/bench_core.py --first-verdict-only   # only the fresh-process rows (~2 min)

Prints these tables, each row repeated (the median and the range of the repeats): client CPU per
inline evaluation and per judge client call (0 ms judge; the fast path, litellm's and the raw OpenAI
SDK's), offline batch throughput (100 ms judge), attribution under 50 concurrent runs, import time
(the median of 9 interleaved pairs of fresh interpreters), and the first verdict of a fresh process
(agno, judgehooks and pydantic-evals in turn, 5 rounds) with judgehooks' import profile. Charts of
the repeats go to docs/images/benchmarks/. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _charts import strip_chart  # noqa: E402
from _common import cpu_ms_per_call, spread, stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent  # noqa: E402
from agno.db.sqlite import SqliteDb  # noqa: E402
from agno.eval import AgentAsJudgeEval as AgnoEval  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks import (  # noqa: E402
    AgentAsJudgeEval,
    LiteLLMJudge,
    MemoryStore,
    SQLiteStore,
)
from judgehooks._judges.prompt import verdict_schema  # noqa: E402
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


def cpu_table(base_url: str, n: int, tmp: str, repeats: int) -> None:
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
        "judgehooks, SQLiteStore, fast path off (litellm.acompletion)": hook(ours(
            base_url, store=SQLiteStore(f"{tmp}/slow.db"),
            judge=LiteLLMJudge("openai/judge", api_base=base_url, api_key="bench", fast_path=False))),
        "judgehooks overhead only (FakeJudge, SQLiteStore)": hook(AgentAsJudgeEval(
            criteria=CRITERIA, judge=FakeJudge('{"passed": true, "reason": "ok"}'),
            store=SQLiteStore(f"{tmp}/fake.db"))),
    }
    # The judge client call alone, on the judgehooks loop: the fast path, litellm's, the raw SDK's.
    request = ours(base_url)._call.request(judgehooks.EvalContext(input="What is the capital of France?",
                                                                  output=str(run_output.content)))
    fast = LiteLLMJudge("openai/judge", api_base=base_url, api_key="bench")
    slow = LiteLLMJudge("openai/judge", api_base=base_url, api_key="bench", fast_path=False)
    assert fast.route is not None and slow.route is None

    async def raw_sdk_call() -> None:
        import openai

        client = raw_clients.get(id(asyncio.get_running_loop()))
        if client is None:
            client = raw_clients[id(asyncio.get_running_loop())] = openai.AsyncOpenAI(
                base_url=base_url, api_key="bench", max_retries=0)
        await client.chat.completions.create(model="judge", messages=list(request.messages),
                                             response_format=verdict_schema("binary"))

    raw_clients: dict[int, object] = {}
    calls = {
        "judge client call: fast path (OpenAI SDK, litellm's route)": lambda: fast.complete(request),
        "judge client call: litellm.acompletion": lambda: slow.complete(request),
        "judge client call: raw OpenAI SDK chat.completions.create": raw_sdk_call,
    }

    async def loop_of(make, k: int) -> None:
        for _ in range(k):
            await make()

    def on_loop(make):
        return lambda: runtime.call(loop_of, make, 1)

    rows, repeats_of = [], {}
    for label, fn in {**candidates, **{k: on_loop(v) for k, v in calls.items()}}.items():
        for _ in range(20):
            fn()  # warm up: imports, connections, tables
        repeats_of[label] = [cpu_ms_per_call(fn, n) for _ in range(repeats)]
        rows.append([label, *spread(repeats_of[label])])
    strip_chart("core-cpu", "Client CPU per inline evaluation and per judge call, 0 ms judge",
                "CPU ms, lower is better", repeats_of)
    table(f"Client CPU per inline evaluation, 0 ms judge (ms, n={n} per repeat, {repeats} repeats, lower is better)",
          ["path", "median CPU ms", "range"], rows)


async def batch_rates(base_url: str, n_cases: int, repeats: int) -> list[list[object]]:
    cases = [{"input": f"question {i}", "output": f"answer {i}"} for i in range(n_cases)]
    agno_eval = agnos(base_url, show_spinner=False)
    agno_rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = await agno_eval.arun(cases=cases)
        agno_rates.append(len(result.results) / (time.perf_counter() - start))
    base = statistics.median(agno_rates)
    rows: list[list[object]] = [["agno AgentAsJudgeEval.arun", n_cases, *spread(agno_rates), 1.0]]
    repeats_of = {"agno AgentAsJudgeEval.arun": agno_rates}
    for label, settings in (
            ("judgehooks arun, max_concurrency=64, in-process", {}),
            ("judgehooks arun, max_concurrency=64, in-process, fast path off",
             {"judge": LiteLLMJudge("openai/judge", api_base=base_url, api_key="bench", fast_path=False)}),
            ("judgehooks arun, max_concurrency=128, in-process", {"max_concurrency": 128}),
            ("judgehooks arun, max_concurrency=64, 2 judge processes", {"judge_process": True, "judge_processes": 2})):
        evaluator = ours(base_url, **{"max_concurrency": 64, **settings})
        await evaluator.arun(cases=cases[:20])  # warm up (and start the judge processes)
        rates = []
        for _ in range(repeats):
            start = time.perf_counter()
            result = await evaluator.arun(cases=cases)
            rates.append(result.graded_count / (time.perf_counter() - start))
        rows.append([label, n_cases, *spread(rates), statistics.median(rates) / base])
        repeats_of[label] = rates
    strip_chart("core-offline", f"Offline batch, {n_cases} cases, 100 ms judge", "evaluations/s, higher is better",
                repeats_of)
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


def import_times(pairs: int) -> None:
    """Median of `pairs` interleaved pairs of fresh interpreters (agno first, then judgehooks), with
    bytecode caches warm, as an installed package has them. Three pairs: the bare package (the
    issue's goal: its names load on first use), the one-line swap of agno's evaluator, and every
    public name at once (what a process that uses all of judgehooks pays)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def once(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        return (time.perf_counter() - start) * 1000

    litellm = "import os; os.environ['LITELLM_LOCAL_MODEL_COST_MAP']='True'; import litellm"
    everything = "import judgehooks; [getattr(judgehooks, name) for name in judgehooks.__all__]"
    swap = ("from agno.eval.agent_as_judge import AgentAsJudgeEval", "from judgehooks import AgentAsJudgeEval")
    cases = [("import agno.eval.base", "import judgehooks"), swap, ("import agno.eval.base", everything)]
    for code in ("import judgehooks", everything, litellm, *swap):
        once(code)  # write the bytecode caches
    base = [once("pass") for _ in range(pairs)]
    start = statistics.median(base)
    rows = []
    for theirs, ours in cases:
        theirs_ms, ours_ms, delta = [], [], []
        for _ in range(pairs):
            a, o = once(theirs), once(ours)
            theirs_ms.append(a - start)
            ours_ms.append(o - start)
            delta.append(o - a)
        rows.append([theirs, *spread(theirs_ms), "", ""])
        rows.append([ours, *spread(ours_ms), f"{statistics.median(delta):.1f}",
                     f"{min(delta):.0f} to {max(delta):.0f}"])
    lite = [once(litellm) - start for _ in range(3)]
    rows.append(["litellm (deferred to first judge call)", *spread(lite), "", ""])
    table(f"Import time, wall ms ({pairs} interleaved pairs of fresh interpreters per comparison; start-up "
          f"{start:.0f} ms subtracted)",
          ["import", "median ms", "range", "judgehooks - agno (median of pairs)", "pair range"], rows)


FIRST_VERDICT = os.path.join(os.path.dirname(__file__), "_first_verdict.py")
PEERS = ("agno", "judgehooks", "pydantic-evals")


def first_verdict(base_url: str, tmp: str, rounds: int) -> None:
    """Wall time of a fresh process from start to exit: import, build an agent with its judge, run
    once against the loopback server, store the verdict (`_first_verdict.py`). The peers take turns
    in each round, the order rotating, so a busy moment falls on each of them alike."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def once(which: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, FIRST_VERDICT, which, base_url, tmp], check=True, env=env)
        return time.perf_counter() - start

    for which in PEERS:
        once(which)  # write the bytecode caches, as an installed package has them
    seconds: dict[str, list[float]] = {which: [] for which in PEERS}
    ratio: dict[str, list[float]] = {which: [] for which in PEERS}
    for r in range(rounds):
        order = PEERS[r % 3:] + PEERS[:r % 3]
        got = {which: once(which) for which in order}
        for which in PEERS:
            seconds[which].append(got[which])
            ratio[which].append(got[which] / got["agno"])
    labels = {"agno": "agno AgentAsJudgeEval in post_hooks, SqliteDb",
              "judgehooks": "judgehooks AgentAsJudgeEval in post_hooks, SQLiteStore",
              "pydantic-evals": "pydantic-evals OnlineEvaluator(LLMJudge), sink to SQLite"}
    rows = [[labels[w], *spread(seconds[w]), f"{statistics.median(ratio[w]):.2f}x",
             f"{min(ratio[w]):.2f}-{max(ratio[w]):.2f}"] for w in PEERS]
    table(f"First verdict of a fresh process, wall s (start to exit; {rounds} rounds, the peers in turn)",
          ["process", "median s", "range", "x agno (median of rounds)", "range of ratios"], rows)
    strip_chart("core-first-verdict", "First verdict of a fresh process (interpreter start to exit)",
                "wall seconds, lower is better", {labels[w]: seconds[w] for w in PEERS})
    import_profile(base_url, tmp)


def import_profile(base_url: str, tmp: str, top: int = 12) -> None:
    """judgehooks' fresh process under ``-X importtime``: the top-level imports by cumulative time."""
    run = subprocess.run([sys.executable, "-X", "importtime", FIRST_VERDICT, "judgehooks", base_url, tmp],
                         check=True, capture_output=True, text=True)
    found = []
    for line in run.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)$", line)
        if m:  # depth 0: what the process itself imported, with everything under it
            found.append((int(m[1]) / 1000, m[2]))
    found.sort(reverse=True)
    litellm = any(name == "litellm" or name.startswith("litellm.") for _, name in found)
    table(f"judgehooks' fresh process: top-level imports by cumulative ms (-X importtime, one run; "
          f"litellm imported: {'yes' if litellm else 'no'})", ["module", "cumulative ms"],
          [[name, ms] for ms, name in found[:top]])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--first-verdict-only", action="store_true")
    parser.add_argument("--rounds", type=int, default=5, help="first-verdict rounds")
    args = parser.parse_args()
    n = 100 if args.quick else 300
    print(f"judgehooks {judgehooks.__version__} benchmark; cores={os.cpu_count()}; python {sys.version.split()[0]}")
    if args.first_verdict_only:
        with tempfile.TemporaryDirectory() as tmp, stub_server(0) as server:
            first_verdict(server.base_url, tmp, args.rounds)
        return
    with tempfile.TemporaryDirectory() as tmp, stub_server(0) as server:
        cpu_table(server.base_url, n, tmp, args.repeats)
        server.configure(judge_delay_ms=100)
        rows = asyncio.run(batch_rates(server.base_url, 200, args.repeats))
        table(f"Offline batch, 200 cases, 100 ms judge ({args.repeats} repeats)",
              ["evaluator", "cases", "median evals/s", "range", "x agno (medians)"], rows)
        rows = asyncio.run(concurrent_attribution(server.base_url, tmp, 50))
        table("50 concurrent arun() sharing one eval, 100 ms judge", ["evaluator", "runs", "stored", "attributed"],
              rows)
        server.configure(judge_delay_ms=0)
        first_verdict(server.base_url, tmp, args.rounds)
    import_times(9)


if __name__ == "__main__":
    main()
