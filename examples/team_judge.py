"""A Team graded in its post hook: records carry the team's id and name.

    python examples/team_judge.py
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from agno.team import Team

from judgehooks import AgentAsJudgeEval, MemoryStore
from judgehooks.testing import StubLLMServer

with StubLLMServer() as server:
    def model() -> OpenAILike:
        return OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed")

    store = MemoryStore()
    judge = AgentAsJudgeEval(criteria="The team answers the customer politely.", model="openai/judge",
                             api_base=server.base_url, api_key="no-key-needed", store=store,
                             on_fail=lambda r: print(f"team {r.team_name} failed: {r.reason}"))
    team = Team(name="Support", id="support-team", model=model(), telemetry=False,
                members=[Agent(name="Researcher", model=model(), telemetry=False)], post_hooks=[judge])
    team.run("Where is my order?")
    team.run("Refund me now! [[fail]]")
    for r in store.records:
        print(r.team_id, r.team_name, r.status, r.reason)
