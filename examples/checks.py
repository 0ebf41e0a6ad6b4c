"""Deterministic checks: no LLM call, the same records, stores and callbacks as the LLM judge.

    python examples/checks.py

An agent with tools and a team whose member does the research, both graded in post_hooks by
regex / not-contains / exact-match / JSON-schema / tool-use / budget checks and an agno Scorer.
The models are the scripted loopback server from `judgehooks.testing` (no key, no network): its
`[[tools=...]]` hint makes the agent call those tools, `[[raw]]` makes it answer with the message.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from agno.scorer import ToolCallScorer
from agno.team import Team

from judgehooks import Budget, ExactMatch, JSONSchema, MemoryStore, NotContains, Regex, ScorerEval, ToolUse
from judgehooks.testing import StubLLMServer


def search(query: str) -> str:
    """Search the knowledge base."""
    return "Paris is the capital of France."


def cite(query: str) -> str:
    """Format a citation."""
    return "[1] Atlas of Europe"


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
           "required": ["city", "temp_c"]}


def main() -> None:
    store = MemoryStore()
    with StubLLMServer() as server:
        def model() -> OpenAILike:
            return OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed")

        checks = [
            Regex(r"capital of \w+", name="names-a-capital", store=store),
            NotContains(["as an AI", "I cannot"], case_sensitive=False, name="no-refusal", store=store),
            ToolUse(["search", "cite"], in_order=True, name="search-then-cite", store=store),
            Budget(max_tokens=2_000, max_latency_ms=30_000, name="budget", store=store),
        ]
        agent = Agent(name="researcher", id="researcher", model=model(), tools=[search, cite],
                      post_hooks=checks, telemetry=False)
        agent.run("What is the capital of France? [[tools=search,cite]]")
        agent.run("What is the capital of France? [[tools=cite,search]]")  # cites before searching

        structured = Agent(name="weather", id="weather", model=model(), telemetry=False, post_hooks=[
            JSONSchema(WEATHER, name="weather-json", store=store),
            ExactMatch(name="exact", store=store)])
        answer = '{"city": "Paris", "temp_c": 21}'
        structured.run(f"[[raw]] {answer}", metadata={"expected": answer})
        structured.run('[[raw]] {"city": "Paris", "temp_c": "warm"}', metadata={"expected": "-"})

        member = Agent(name="Researcher", id="member-researcher", model=model(), tools=[search], telemetry=False)
        team_checks = [ToolUse(["search"], name="team-searched", store=store),
                       ScorerEval(ToolCallScorer(["search"]), name="agno-tool-scorer", store=store)]
        team = Team(name="Desk", id="desk", members=[member], model=model(), post_hooks=team_checks, telemetry=False)
        team.run("Capital of France? [[tools=delegate_task_to_member,search]] [[member=member-researcher]]")

    print(f"{len(store.records)} records, judge calls: {server.settings.counts['judge']}")
    for r in store.records:
        who = r.agent_id or r.team_id
        print(f"  {who:10} {r.evaluator:17} {r.status:7} {r.reason or r.error_message or f'score {r.score:g}'}")


if __name__ == "__main__":
    main()
