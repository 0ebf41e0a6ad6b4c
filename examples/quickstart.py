"""Quickstart: an agno Agent whose every run is graded by an LLM judge, verdicts in SQLite.

    python examples/quickstart.py

No API key and no network: the agent's model and the judge both talk over real HTTP to the
scripted OpenAI-compatible server that ships in `judgehooks.testing` (its "judge" reads the
`[[score=N]]` hints in the text, so you can see passes, failures and a judge outage). To use a
real judge instead, set JUDGEHOOKS_MODEL (any litellm model string, e.g. openai/gpt-4o-mini) and
the provider's key (e.g. OPENAI_API_KEY).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import tempfile
from collections import Counter

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

from judgehooks import AgentAsJudgeEval, EvalRecord, SQLiteStore
from judgehooks.testing import StubLLMServer

QUESTIONS = [
    "What is the capital of France? [[score=9]]",
    "Summarise the plot of Hamlet in one line. [[score=8]]",
    "Give me a made-up statistic about cats. [[score=3]]",
    "Explain recursion to a child. [[score=7]]",
    "What's 17 * 23? [[judge_status=500]]",  # the judge is down for this one: an `error` record
]


def alert(record: EvalRecord) -> None:
    print(f"  ALERT  {record.evaluator} scored {record.score:g}/10 on run {record.run_id[:8]}: {record.reason}")


async def report_error(record: EvalRecord) -> None:
    print(f"  ERROR  judge failed after {record.attempts} attempts: {record.error_type}")


def main() -> None:
    db_path = os.path.join(tempfile.mkdtemp(), "quickstart.db")
    with StubLLMServer() as server:
        real_judge = os.environ.get("JUDGEHOOKS_MODEL")
        judge = AgentAsJudgeEval(
            name="helpful",
            criteria="The answer addresses the question and invents no facts.",
            scoring_strategy="numeric",
            threshold=7,
            model=real_judge or "openai/judge",
            api_base=None if real_judge else server.base_url,
            api_key=None if real_judge else "no-key-needed",
            retries=1,
            retry_backoff=0.05,
            on_fail=alert,
            on_error=report_error,
            store=SQLiteStore(db_path),
        )
        agent = Agent(name="assistant", id="assistant",
                      model=OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed"),
                      post_hooks=[judge], telemetry=False)

        print("Running the agent; each run is graded in its post hook:")
        for question in QUESTIONS[:3]:
            agent.run(question, user_id="demo-user")  # sync runs ...

        async def concurrent_runs() -> None:  # ... and concurrent async runs sharing the same judge
            await asyncio.gather(*(agent.arun(q, user_id="demo-user") for q in QUESTIONS[3:]))

        asyncio.run(concurrent_runs())

        records = judge.store.query_sync(agent_id="assistant")
        counts = Counter(r.status for r in records)
        graded = counts["passed"] + counts["failed"]
        print(f"\n{len(records)} verdicts stored in {db_path}")
        print(f"pass rate {100 * counts['passed'] / graded:.0f}% over {graded} graded runs; "
              f"{counts['error']} judge error(s), never counted as failures")
        for r in sorted(records, key=lambda r: r.created_at):
            score = "-" if r.score is None else f"{r.score:g}"
            print(f"  {r.status:7} score={score:>2}  {r.input[:45]:45}  {r.reason or r.error_type}")


if __name__ == "__main__":
    main()
