"""A fresh process's first verdict through the fast OpenAI-compatible path never imports litellm
(its import takes seconds): a real agno agent, its judge in post_hooks, the loopback stub, SQLite."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CODE = """
import json, sys
from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from judgehooks import AgentAsJudgeEval, SQLiteStore

base, db = sys.argv[1:3]
store = SQLiteStore(db)
judge = AgentAsJudgeEval(criteria="The answer echoes the question.", model="openai/gpt-4o-mini", api_base=base,
                         api_key="k", store=store)
agent = Agent(model=OpenAILike(id="agent", base_url=base, api_key="k"), telemetry=False, post_hooks=[judge])
agent.run("What is the capital of France?")
[record] = store.query_sync(limit=None)
print(json.dumps({"status": record.status, "cost": record.cost_usd, "litellm": "litellm" in sys.modules}))
"""


def _first_verdict(server, tmp_path, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CODE, server.base_url, str(tmp_path / "evals.db")],
                         capture_output=True, text=True, timeout=300, check=True,
                         env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_fast_path_grades_and_prices_without_importing_litellm(server, tmp_path):
    result = _first_verdict(server, tmp_path)
    assert result["status"] == "passed"
    assert result["litellm"] is False
    assert result["cost"] is not None and result["cost"] > 0  # priced from litellm's table, litellm unimported


def test_with_the_fast_path_off_litellm_makes_the_call(server, tmp_path):
    result = _first_verdict(server, tmp_path, JUDGEHOOKS_FAST_JUDGE="0")
    assert result["status"] == "passed" and result["litellm"] is True
