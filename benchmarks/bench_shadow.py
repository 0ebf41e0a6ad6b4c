"""A Shadow on live traffic: what it adds to the live run, and how many comparisons a second it
finishes with 256 in flight.

    python benchmarks/bench_shadow.py            # 3 repeats (~2 minutes)
    python benchmarks/bench_shadow.py --quick    # fewer runs

Tables (median of the repeats, and their range):
1. the latency the hook adds to each `arun()` of the live agent (the hook's own time, as
   bench_peers measures it), with a `Shadow` (sample_rate=1: every run compared), beside
   judgehooks' background judge and agno's own `AgentAsJudgeEval` (run_in_background=True: outside
   AgentOS agno grades inline, so the run waits for its judge);
2. comparisons finished per second at 256 in flight: each one a candidate run (the stub model) and a
   pairwise judge call (200 ms), stored in SQLite, beside the background judge's rate on the same
   stub (one judge call per evaluation). The loopback server is a separate process. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from _common import spread, stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent  # noqa: E402
from agno.eval import AgentAsJudgeEval as AgnoEval  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks import AgentAsJudgeEval, Shadow, SQLiteStore  # noqa: E402

CRITERIA = "The answer echoes the question."


def live_agent(base_url: str, *hooks: Any) -> Agent:
    return Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="bench"), id="live", name="live",
                 instructions="Answer briefly.", post_hooks=list(hooks), telemetry=False)


def shadow(base_url: str, tmp: str, name: str, **kw: Any) -> Shadow:
    return Shadow(instructions="Answer in one short paragraph.", judge_model="openai/judge", api_base=base_url,
                  api_key="bench", name=name, sample_rate=1.0, store=SQLiteStore(f"{tmp}/{name}.db"),
                  outbox=f"{tmp}/{name}.outbox.db", **kw)


def background_judge(base_url: str, tmp: str, name: str, **kw: Any) -> AgentAsJudgeEval:
    return AgentAsJudgeEval(criteria=CRITERIA, name=name, model="openai/judge", api_base=base_url, api_key="bench",
                            store=SQLiteStore(f"{tmp}/{name}.db"), outbox=f"{tmp}/{name}.outbox.db",
                            run_in_background=True, **kw)


async def added_ms(hook: Any, agent: Agent, run: Any, n: int, tag: str) -> float:
    """Median time the hook takes in a live `arun()` (what the run waits for), `n` runs at 100 a
    second, as bench_peers times it: the hook alone, so the comparisons running meanwhile in the
    background count only as far as they slow the hook."""
    added = []
    given = {"agent": agent} if "agent" in inspect.signature(hook.async_post_check).parameters else {}  # agno's: none
    for i in range(n):
        run.run_id = f"{tag}-{i}"
        start = time.perf_counter()
        await hook.async_post_check(run, **given)
        added.append((time.perf_counter() - start) * 1000)
        await asyncio.sleep(0.01)
    return statistics.median(added)


def latency(base_url: str, tmp: str, n: int, repeats: int) -> None:
    rows: list[list[object]] = []
    cases = [("judgehooks Shadow (sample_rate=1)", lambda r: shadow(base_url, tmp, f"shadow-lat-{r}")),
             ("judgehooks AgentAsJudgeEval(run_in_background=True)",
              lambda r: background_judge(base_url, tmp, f"judge-lat-{r}")),
             ("agno AgentAsJudgeEval(run_in_background=True)",
              lambda r: AgnoEval(criteria=CRITERIA, model=OpenAILike(id="judge", base_url=base_url, api_key="bench"),
                                 telemetry=False, show_spinner=False, run_in_background=True))]
    for label, make in cases:
        medians = []
        for r in range(repeats):
            hook = make(r)
            agent = live_agent(base_url, hook)
            run = agent.run("What is the capital of France?")  # the live run, graded once here too
            asyncio.run(added_ms(hook, agent, run, 5, f"warm-{r}"))
            medians.append(asyncio.run(added_ms(hook, agent, run, n, f"lat-{r}")))
            judgehooks.drain(600)
        rows.append([label, n, *spread(medians)])
    table("Added latency per live arun(): the hook's own time, 200 ms judge, 100 runs/s (median ms per repeat)",
          ["hook", "runs/repeat", "median ms", "range ms"], rows)


def rate(base_url: str, tmp: str, n: int, repeats: int) -> None:
    rows: list[list[object]] = []
    for label, make, per in [
            ("judgehooks Shadow: candidate run + pairwise judge", lambda r: shadow(
                base_url, tmp, f"shadow-rate-{r}", max_concurrency=256, max_queue=n + 1), "comparisons/s"),
            ("judgehooks AgentAsJudgeEval(run_in_background=True): one judge call", lambda r: background_judge(
                base_url, tmp, f"judge-rate-{r}", max_concurrency=256, max_queue=n + 1), "evaluations/s")]:
        rates, lost = [], 0
        for r in range(repeats):
            hook = make(r)
            agent = live_agent(base_url, hook)
            runs = [agent.run(f"question {i}") for i in range(20)]  # the live runs to compare
            judgehooks.drain(600)
            store = hook.hook_settings.store if hasattr(hook, "hook_settings") else None
            start = time.perf_counter()
            for i in range(n):
                run = runs[i % len(runs)]
                run.run_id = f"rate-{r}-{i}"
                hook.post_check(run, agent=agent)
            judgehooks.drain(600)
            rates.append(n / (time.perf_counter() - start))
            stored = len(asyncio.run(_all(store))) if store is not None else n + len(runs)
            lost += max(0, n + len(runs) - stored)
        rows.append([label, n, *spread(rates), per, lost])
    table("Finished per second at 256 in flight, 200 ms judge (median of the repeats)",
          ["hook", "jobs/repeat", "median /s", "range /s", "unit", "lost"], rows)


async def _all(store: Any) -> list[Any]:
    return await store.query(limit=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("latency", "rate"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, stub_server(200) as server:
        if args.only in (None, "latency"):
            latency(server.base_url, tmp, 40 if args.quick else 100, args.repeats)
        if args.only in (None, "rate"):
            rate(server.base_url, tmp, 500 if args.quick else 2000, args.repeats)


if __name__ == "__main__":
    main()
