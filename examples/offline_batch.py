"""Offline grading: a batch of input/output cases graded concurrently, errors reported beside the pass rate.

    python examples/offline_batch.py

Uses the scripted loopback server from `judgehooks.testing` (no key, no network); pass
`model="openai/gpt-4o-mini"` (and set OPENAI_API_KEY) to grade with a real model.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from judgehooks import AgentAsJudgeEval, MemoryStore
from judgehooks.testing import StubLLMServer

CASES = [
    {"input": "Capital of Japan?", "output": "Tokyo. [[score=10]]", "expected_output": "Tokyo"},
    {"input": "Capital of Australia?", "output": "Sydney. [[score=2]]", "expected_output": "Canberra"},
    {"input": "Capital of Canada?", "output": "Ottawa. [[score=9]]", "expected_output": "Ottawa"},
    {"input": "Capital of Brazil?", "output": "Brasília. [[judge_malformed]]", "expected_output": "Brasília"},
]

with StubLLMServer() as server:
    judge = AgentAsJudgeEval(
        name="correct-capital",
        criteria="The output names the same city as the expected output.",
        scoring_strategy="numeric",
        threshold=8,
        model="openai/judge",
        api_base=server.base_url,
        api_key="no-key-needed",
        retries=1,
        retry_backoff=0.05,
        max_concurrency=8,
        store=MemoryStore(),
    )
    result = judge.run(cases=CASES, print_summary=True, print_results=True)
    print(f"graded={result.graded_count} pass_rate={result.pass_rate:.0f}% errors={result.error_count}")
