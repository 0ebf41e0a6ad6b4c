"""Session benchmark: what a SessionJudge's post hook costs each run, beside a run-level evaluator.

Both are timed in the same process, on the same agno run output, in the same rounds: the
run-level evaluator is `AgentAsJudgeEval(run_in_background=True)` (snapshot, sample, persist the job
in the outbox, hand off), the session evaluator `SessionJudge` (snapshot, sample the session, write
the turn and re-arm the session's due time in the outbox file). The sessions are never due here
(idle_after is an hour), so only the hook path is measured. Goal: within 0.1 ms per run.

    python benchmarks/bench_sessions.py [--runs 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from _common import stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks import AgentAsJudgeEval, SessionJudge, SQLiteStore  # noqa: E402

CRITERIA = "Answers the question."
TURNS_PER_SESSION = 4


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def evaluators(base_url: str, tmp: str) -> dict[str, Any]:
    judge = {"model": "openai/judge", "api_base": base_url, "api_key": "bench"}
    return {
        "run-level: AgentAsJudgeEval(run_in_background=True)": AgentAsJudgeEval(
            criteria=CRITERIA, name="run-level", store=SQLiteStore(f"{tmp}/run.db"), run_in_background=True,
            outbox=f"{tmp}/run.outbox.db", max_queue=1_000_000, **judge),
        "session: SessionJudge(idle_after=3600)": SessionJudge(
            CRITERIA, name="session", store=SQLiteStore(f"{tmp}/session.db"), outbox=f"{tmp}/session.outbox.db",
            idle_after=3600, **judge),
    }


def timed_sync(hook: Callable[..., None], agent: Any, run_output: Any, prefix: str, n: int) -> list[float]:
    times = []
    for i in range(n):
        run_output.run_id, run_output.session_id = f"{prefix}-{i}", f"{prefix}-s{i // TURNS_PER_SESSION}"
        start = time.perf_counter()
        hook(run_output, agent=agent)
        times.append((time.perf_counter() - start) * 1000)
    return times


async def timed_async(hook: Callable[..., Any], agent: Any, run_output: Any, prefix: str, n: int) -> list[float]:
    times = []
    for i in range(n):
        run_output.run_id, run_output.session_id = f"{prefix}-{i}", f"{prefix}-s{i // TURNS_PER_SESSION}"
        start = time.perf_counter()
        await hook(run_output, agent=agent)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000, help="runs per evaluator, path and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"judgehooks {judgehooks.__version__}; cores={os.cpu_count()}; python {sys.version.split()[0]}; "
          f"{args.runs} runs x {args.rounds} rounds, {TURNS_PER_SESSION} turns per session")
    with tempfile.TemporaryDirectory() as tmp, stub_server(500) as server:
        agent = Agent(model=OpenAILike(id="agent", base_url=server.base_url, api_key="bench"), id="bench-agent",
                      telemetry=False)
        run_output = agent.run("What is the capital of France?")
        found = evaluators(server.base_url, tmp)
        for name, ev in found.items():  # warm up: tables, judge processes, first connections
            timed_sync(ev.post_check, agent, run_output, f"warm-{name[:3]}", 50)
        medians: dict[tuple[str, str], list[float]] = {}
        rows = []
        for round_ in range(1, args.rounds + 1):
            for name, ev in found.items():  # the same round for both, one after the other
                for path in ("run()", "arun()"):
                    prefix = f"{name[:3]}-{path}-{round_}"
                    times = (timed_sync(ev.post_check, agent, run_output, prefix, args.runs) if path == "run()" else
                             asyncio.run(timed_async(ev.async_post_check, agent, run_output, prefix, args.runs)))
                    medians.setdefault((name, path), []).append(statistics.median(times))
                    rows.append([name, path, round_, args.runs, statistics.median(times), percentile(times, 0.99)])
        table("Post-hook time per run, ms (the run waits this long; grading happens elsewhere)",
              ["evaluator", "path", "round", "runs", "median ms", "p99 ms"], rows)
        names = list(found)
        diffs = [[path, statistics.median(medians[(names[1], path)]) - statistics.median(medians[(names[0], path)])]
                 for path in ("run()", "arun()")]
        table("Session minus run-level, median of the rounds' medians, ms (goal: within 0.1)",
              ["path", "difference ms"], diffs)
        judgehooks.drain(600)  # the run-level jobs; the sessions stay open (never due here)


if __name__ == "__main__":
    main()
