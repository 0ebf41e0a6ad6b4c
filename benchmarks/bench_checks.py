"""Checks benchmark: what a deterministic check costs per run, beside agno's own tool-call checks,
and what an ordered cheap check saves in front of an LLM judge.

    python benchmarks/bench_checks.py            # 2,000 evaluations per row
    python benchmarks/bench_checks.py --quick    # 300

Tables: client CPU per evaluation of one agent run that made a tool call (agno's ReliabilityEval
and ToolCallScorer beside judgehooks' ToolUse, ScorerEval, Regex and a Group, each writing its
record to a MemoryStore and logging it); wall time per run with a 200 ms judge, alone and behind
an `Ordered` gate that fails half the runs. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import cpu_ms_per_call, stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent  # noqa: E402
from agno.eval.reliability import ReliabilityEval  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402
from agno.scorer import ToolCallScorer  # noqa: E402

from judgehooks import (  # noqa: E402
    AgentAsJudgeEval,
    Contains,
    Group,
    MemoryStore,
    NotContains,
    Ordered,
    Regex,
    ScorerEval,
    ToolUse,
)


def lookup(text: str) -> str:
    """Look a fact up."""
    return "Paris"


def cpu(base_url: str, n: int) -> None:
    agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="bench"), id="bench-agent",
                  tools=[lookup], telemetry=False)
    run_output = agent.run("Capital of France? [[tools=lookup]]")
    counter = iter(range(10**9))

    def hook(evaluator):
        def call() -> None:
            run_output.run_id = f"{evaluator.evaluator}-{next(counter)}"  # a new record each time
            evaluator.post_check(run_output, agent=agent)
        return call

    reliability = ReliabilityEval(agent_response=run_output, expected_tool_calls=["lookup"], show_spinner=False,
                                  telemetry=False)
    scorer = ToolCallScorer(["lookup"])
    candidates = {
        "agno ReliabilityEval(expected_tool_calls).run()": reliability.run,
        "agno ToolCallScorer.score(run), no record": lambda: scorer.score(run_output),
        "judgehooks ToolUse(['lookup'])": hook(ToolUse(["lookup"], store=MemoryStore())),
        "judgehooks ScorerEval(ToolCallScorer)": hook(ScorerEval(scorer, store=MemoryStore())),
        "judgehooks Regex": hook(Regex(r"ECHO: \w+", store=MemoryStore())),
        "judgehooks Group(Regex, Contains, ToolUse)": hook(Group(
            [Regex("ECHO"), Contains("Paris"), ToolUse(["lookup"])], store=MemoryStore())),
    }
    rows = []
    for label, fn in candidates.items():
        for _ in range(50):
            fn()  # warm up
        rows.append([label, cpu_ms_per_call(fn, n)])
    base = rows[0][1]
    table(f"Client CPU per evaluation, one run with a tool call, inline, {n:,} evaluations",
          ["check", "CPU ms / evaluation", "vs agno ReliabilityEval"], [r + [r[1] / base] for r in rows])


def gate(base_url: str, runs: int) -> None:
    agent_model = OpenAILike(id="agent", base_url=base_url, api_key="bench")
    judge_settings = {"criteria": "Answers the question.", "model": "openai/judge", "api_base": base_url,
                      "api_key": "bench", "store": MemoryStore()}
    alone = AgentAsJudgeEval(name="alone", **judge_settings)
    gated = Ordered([NotContains("sorry", case_sensitive=False), AgentAsJudgeEval(name="behind", **judge_settings)],
                    name="gated", store=MemoryStore())
    rows = []
    for label, evaluator in (("AgentAsJudgeEval alone", alone), ("Ordered([NotContains, AgentAsJudgeEval])", gated)):
        agent = Agent(model=agent_model, post_hooks=[evaluator], telemetry=False)
        agent.run("warm up")
        start = time.perf_counter()
        for i in range(runs):
            agent.run("Sorry, no." if i % 2 else "Paris.")
        elapsed = (time.perf_counter() - start) / runs * 1000
        rows.append([label, runs, elapsed])
    table(f"Wall time per inline-graded run, 200 ms judge, half the runs refuse ({runs} runs)",
          ["evaluator", "runs", "ms / run", "vs the judge alone"], [r + [r[2] / rows[0][2]] for r in rows])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    import judgehooks

    print(f"judgehooks {judgehooks.__version__}; cores={os.cpu_count()}; python {sys.version.split()[0]}")
    with stub_server() as server:
        cpu(server.base_url, 300 if args.quick else 2000)
        server.configure(judge_delay_ms=200)
        gate(server.base_url, 10 if args.quick else 40)


if __name__ == "__main__":
    main()
