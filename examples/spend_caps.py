"""Spend caps: judge at most N times, or at most $X, per minute, hour or day.

    python examples/spend_caps.py

No API key and no network: the agent and the judge run on the scripted loopback server
(`judgehooks.testing`). The judge is capped at 3 calls per hour; the 4th and 5th runs are not
judged: their records are `skipped` with reason "budget", `on_drop` hears of them, `stats()`
counts them, and one warning is logged for the window. Then `judgehooks report` shows what the
judge cost per evaluator per day (the stub's model has no price in litellm: "unpriced").
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import subprocess
import sys
import tempfile

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

from judgehooks import AgentAsJudgeEval
from judgehooks.testing import StubLLMServer


def main() -> None:
    with StubLLMServer() as server, tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "evals.db")
        judge = AgentAsJudgeEval(
            name="helpful", criteria="The answer is helpful.", model="openai/judge", api_base=server.base_url,
            api_key="no-key-needed", store=db,
            max_calls=3, max_cost_usd=5.0, per="hour",  # whichever is reached first
            on_drop=lambda r: print(f"  on_drop: run {r.run_id[:8]} not judged ({r.reason}: "
                                    f"{r.details['budget']['calls']} calls this hour)"))
        agent = Agent(model=OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed"),
                      post_hooks=[judge], telemetry=False)
        for i in range(5):
            agent.run(f"Question {i}")
        print("stats:", {k: v for k, v in judge.stats().items() if k in ("evaluator", "over_budget")})
        report = subprocess.run([sys.executable, "-m", "judgehooks._cli", "report", "--store", db],
                                capture_output=True, text=True, check=True).stdout
        print(report[report.index("judge cost per evaluator per day"):])


if __name__ == "__main__":
    main()
