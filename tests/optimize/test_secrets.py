"""No credential reaches the reflection model or the result (audit 4, M3): a judge's or the agent's
error body that quotes ``Authorization: Bearer sk-...`` (as some gateways do), or an answer that
holds a key, is scrubbed by the record path's scrubber before it becomes feedback, ``holdout_before``
or ``holdout_after``. Real agno agents, real judges, the reflection model over HTTP to the loopback
server, which echoes the Authorization header it received in its error body."""

from __future__ import annotations

import json

import pytest
from _world import ORIGINAL, World
from agno.agent import Agent
from agno.models.openai.like import OpenAILike

import judgehooks

pytest.importorskip("gepa")

MASK = "[REDACTED]"
JUDGE_KEY = "sk-judge-4f1c9d2e7a6b3c8d5e0f"
AGENT_KEY = "sk-agent-9e8d7c6b5a4f3e2d1c0b"
LEAKED = "sk-leaked-1a2b3c4d5e6f7a8b9c0d"


def _optimize(world: World, agent: Agent, cases: list[dict]) -> judgehooks.OptimizeResult:
    return judgehooks.optimize(agent, cases, evaluators=[world.judge(api_key=JUDGE_KEY, retries=0)],
                               reflection_model="openai/reflect", api_base=world.server.base_url,
                               api_key="test-key", max_metric_calls=40, holdout=0.5)


def _everything(world: World, result: judgehooks.OptimizeResult) -> str:
    return "\n".join([*world.reflection_prompts, json.dumps(result.holdout_before),
                      json.dumps(result.holdout_after), json.dumps(result.to_json(), default=str)])


def test_a_judge_error_body_quoting_the_key_and_an_answer_holding_one_are_scrubbed(server):
    world = World(server)

    def handle(request):
        text = json.dumps(request.get("messages"))
        if request.get("model") == "judge" and "judge_echo_auth" in text:
            return None  # the stub's own judge: a 400 whose body quotes the request's Authorization header
        if request.get("model") == "agent" and "[[leak]]" in text:
            return f"here you go. Authorization: Bearer {LEAKED}"
        return world.handle(request)

    server.configure(handler=handle)
    cases = [{"id": f"q{i}", "input": f"question {i} " + ("[[judge_echo_auth=400]]" if i % 2 else "[[leak]]")}
             for i in range(12)]
    result = _optimize(world, world.agent(), cases)
    seen = _everything(world, result)
    assert "Authorization: Bearer" in seen and MASK in seen  # the error and the answer did get there, masked
    assert any(v["status"] == "error" and MASK in v["reason"] for r in result.holdout_before for v in r["verdicts"])
    assert any(MASK in r["output"] for r in result.holdout_before)
    assert JUDGE_KEY not in seen and LEAKED not in seen


def test_an_agent_run_that_ends_in_an_error_quoting_its_key_is_scrubbed(server):
    """agno ends the run with status error and the provider's message, key and all, as its content."""
    world = World(server)
    agent = Agent(model=OpenAILike(id="judge-agent", base_url=server.base_url, api_key=AGENT_KEY),
                  instructions=ORIGINAL, telemetry=False)  # "judge-...": the stub's judge route answers it
    cases = [{"id": f"q{i}", "input": f"question {i} [[judge_echo_auth=400]]"} for i in range(8)]
    result = _optimize(world, agent, cases)
    seen = _everything(world, result)
    assert world.reflection_prompts and all(r["status"] == "error" for r in result.holdout_before)
    assert all("Authorization: Bearer" in r["error"] and MASK in r["error"] for r in result.holdout_before)
    assert "Authorization: Bearer" in "".join(world.reflection_prompts)
    assert AGENT_KEY not in seen
