"""Background grading: runs return at once, verdicts land later, nothing is lost.

    python examples/background.py

Each run's evaluation is persisted in an outbox before the hook returns and graded on the
judgehooks event loop (judge calls in a helper process). The script exits without calling
drain(): the exit hook finishes the work. Uses the scripted loopback server (no key, no network).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import tempfile
import time

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

import judgehooks
from judgehooks import AgentAsJudgeEval, SQLiteStore
from judgehooks.testing import StubLLMServer

db = os.path.join(tempfile.mkdtemp(), "background.db")
with StubLLMServer() as server:
    server.configure(judge_delay_ms=500)  # a slow judge
    judge = AgentAsJudgeEval(
        name="polite", criteria="The answer is polite.", model="openai/judge",
        api_base=server.base_url, api_key="no-key-needed", store=SQLiteStore(db),
        run_in_background=True, max_queue=1_000, max_concurrency=16, overload="drop_oldest",
        sample_rate=0.5,  # grade half the runs; records keep sample_rate for re-weighting
        on_drop=lambda r: print("shed:", r.reason),
    )
    agent = Agent(model=OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed"),
                  post_hooks=[judge], telemetry=False)
    start = time.perf_counter()
    for i in range(20):
        agent.run(f"Question {i}")
    print(f"20 runs returned in {time.perf_counter() - start:.2f} s with a 500 ms judge")
    print("right after the runs:", {k: v for k, v in judge.stats().items()
                                     if k in ("submitted", "sampled_out", "queue_depth", "in_flight", "done")})
    judgehooks.drain(timeout=120)
    stats = judge.stats()
    print(f"after drain: graded {stats['done']}, sampled out {stats['sampled_out']}, dropped {stats['dropped']}")
    print(f"{len(judge.store.query_sync(limit=None))} records in {db}")
