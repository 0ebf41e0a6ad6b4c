"""A numeric judge (1-10, pass at 7) whose failures page someone: `on_fail` and `on_error` alerting.

    python examples/numeric_judge.py

Every run is graded inline (the verdict exists when `run()` returns). A low score calls `on_fail`
with the record; a judge outage is an `error` record that calls `on_error`, never a failure. Uses
the scripted loopback server from `judgehooks.testing` (no key, no network): its "judge" reads the
`[[score=N]]` hints in the questions. For a real judge, replace model/api_base/api_key with e.g.
`model="openai/gpt-4o-mini"` and set OPENAI_API_KEY.
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

pages: list[str] = []  # stands in for your pager / Slack webhook


def page_oncall(record: EvalRecord) -> None:
    """on_fail: sync callbacks run on a worker thread, so a slow pager never stalls grading."""
    pages.append(record.id)
    print(f"  PAGE   {record.evaluator} scored {record.score:g}/10 (threshold {record.threshold}) "
          f"on run {record.run_id[:8]} of {record.agent_id}: {record.reason}")


async def report_judge_trouble(record: EvalRecord) -> None:
    """on_error: the judge could not be read or reached; the run itself may be fine."""
    print(f"  ERROR  judge failed after {record.attempts} attempts: {record.error_type}")


def main() -> None:
    db_path = os.path.join(tempfile.mkdtemp(), "numeric.db")
    with StubLLMServer() as server:
        judge = AgentAsJudgeEval(
            name="helpful",
            criteria="The answer addresses the question and invents no facts.",
            scoring_strategy="numeric",
            threshold=7,
            model="openai/judge",
            api_base=server.base_url,
            api_key="no-key-needed",
            retries=1,
            retry_backoff=0.05,
            on_fail=page_oncall,
            on_error=report_judge_trouble,
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
        print(f"\n{len(records)} verdicts stored in {db_path}; {len(pages)} page(s) sent")
        print(f"pass rate {100 * counts['passed'] / graded:.0f}% over {graded} graded runs; "
              f"{counts['error']} judge error(s), never counted as failures")
        for r in sorted(records, key=lambda r: r.created_at):
            score = "-" if r.score is None else f"{r.score:g}"
            print(f"  {r.status:7} score={score:>2}  {r.input[:45]:45}  {r.reason or r.error_type}")


if __name__ == "__main__":
    main()
