"""What an alert costs the run: failing runs whose on_fail posts a webhook, healthy / dead / hanging receiver.

    python benchmarks/bench_notify.py            # ~1 minute
    python benchmarks/bench_notify.py --quick

Every run fails its judge, so every run calls on_fail. Compared in one run, against the same stub
server (separate process): agno's own AgentAsJudgeEval with an on_fail that POSTs (the obvious way),
judgehooks with the same plain callback, and judgehooks with WebhookNotifier. Prints the median
wall time of agent.run() and its ratio to judgehooks without on_fail. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx  # noqa: E402
from agno.agent import Agent  # noqa: E402
from agno.eval import AgentAsJudgeEval as AgnoEval  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks import AgentAsJudgeEval, MemoryStore, WebhookNotifier  # noqa: E402
from judgehooks.testing import WebhookReceiver  # noqa: E402

CRITERIA = "The answer echoes the question."
POST_TIMEOUT = 2.0  # seconds a notifier waits for a hanging receiver


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/hook"


def plain_post(url: str):
    def on_fail(record) -> None:  # what a user writes without a notifier: a blocking POST (agno passes
        # its AgentAsJudgeEvaluation, judgehooks an EvalRecord: both have `reason`)
        try:
            httpx.post(url, json={"reason": record.reason}, timeout=POST_TIMEOUT)
        except httpx.HTTPError:
            pass
    return on_fail


def median_run_ms(agent: Agent, runs: int) -> float:
    times = []
    for i in range(runs):
        started = time.perf_counter()
        agent.run(f"question {i} [[fail]]")
        times.append((time.perf_counter() - started) * 1000)
    judgehooks.drain(60)  # not timed: queued deliveries finish here
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs, hanging_runs = (10, 3) if args.quick else (30, 5)
    with stub_server() as server, WebhookReceiver() as live, WebhookReceiver(hang=True) as stuck:
        def model(name: str = "agent") -> OpenAILike:
            return OpenAILike(id=name, base_url=server.base_url, api_key="bench")

        def ours(on_fail=None) -> Agent:
            judge = AgentAsJudgeEval(criteria=CRITERIA, model="openai/judge", api_base=server.base_url,
                                     api_key="bench", store=MemoryStore(), on_fail=on_fail)
            return Agent(model=model(), post_hooks=[judge], telemetry=False)

        def agnos(on_fail) -> Agent:
            judge = AgnoEval(criteria=CRITERIA, model=model("judge"), on_fail=on_fail, telemetry=False)
            return Agent(model=model(), post_hooks=[judge], telemetry=False)

        median_run_ms(ours(), 5)  # warm up: litellm's first calls, both evaluators' imports
        median_run_ms(agnos(None), 5)
        scenarios = [
            ("agno AgentAsJudgeEval", "plain POST callback", "healthy", agnos(plain_post(live.url)), runs),
            ("agno AgentAsJudgeEval", "plain POST callback", "dead port", agnos(plain_post(dead_url())), runs),
            ("agno AgentAsJudgeEval", "plain POST callback", "hanging", agnos(plain_post(stuck.url)), hanging_runs),
            ("judgehooks", "none", "-", ours(), runs),
            ("judgehooks", "plain POST callback", "hanging", ours(plain_post(stuck.url)), hanging_runs),
            ("judgehooks", "WebhookNotifier", "healthy", ours(WebhookNotifier(live.url)), runs),
            ("judgehooks", "WebhookNotifier", "dead port",
             ours(WebhookNotifier(dead_url(), retries=2, backoff=0.05)), runs),
            ("judgehooks", "WebhookNotifier", "hanging",
             ours(WebhookNotifier(stuck.url, timeout=POST_TIMEOUT, retries=0)), hanging_runs),
            ("judgehooks", "none (again)", "-", ours(), runs),
        ]
        measured = [(evaluator, on_fail, receiver, n, median_run_ms(agent, n))
                    for evaluator, on_fail, receiver, agent, n in scenarios]
        baseline = next(row[-1] for row in measured if row[:2] == ("judgehooks", "none"))
        rows = [(*row, row[-1] / baseline) for row in measured]
    table(f"Median agent.run() with a failing verdict and on_fail, 0 ms judge (POST timeout {POST_TIMEOUT:g} s)",
          ["evaluator", "on_fail", "receiver", "runs", "median run ms", "x judgehooks without on_fail"], rows)


if __name__ == "__main__":
    main()
