"""The agent passed to `optimize` / `aoptimize` is left exactly as it was, its model included, and works
in the caller's event loop afterwards (audit 4, M4: trial copies shared the agent's model object, so
the AsyncOpenAI client a trial made on judgehooks' loop stayed on the caller's model, and the
caller's next `agent.arun` failed, "bound to a different event loop"). A real agno agent on
`OpenAIChat`, over HTTP to the loopback server."""

from __future__ import annotations

import asyncio

import pytest
from _world import KEYWORD, ORIGINAL, World
from agno.agent import Agent
from agno.models.openai import OpenAIChat

import judgehooks

pytest.importorskip("gepa")

SETTINGS = {"reflection_model": "openai/reflect", "api_key": "test-key", "max_metric_calls": 40, "holdout": 0.5}


def _agent(world: World) -> Agent:
    return Agent(model=OpenAIChat(id="agent", base_url=world.server.base_url, api_key="test-key"),
                 instructions=ORIGINAL, telemetry=False)


def _state(agent: Agent) -> tuple[dict, dict]:
    return dict(vars(agent)), dict(vars(agent.model))


def test_optimize_leaves_the_agent_and_its_model_unchanged_and_usable_in_the_callers_loop(server):
    world = World(server)
    agent = _agent(world)
    before = _state(agent)
    result = judgehooks.optimize(agent, world.cases(12), evaluators=[world.judge()], api_base=server.base_url,
                                 **SETTINGS)
    assert KEYWORD in result.instructions  # the trials ran, with the candidates, on copies
    assert _state(agent) == before
    assert agent.model.async_client is None and agent.model.client is None

    async def later():
        return await agent.arun("what is the capital of France?")

    answer = asyncio.run(later())
    assert answer.content == "what is the capital of france?" and "error" not in str(answer.status).lower()


@pytest.mark.parametrize("ran_before", [False, True], ids=["fresh-agent", "agent-used-in-the-callers-loop"])
def test_aoptimize_leaves_the_agent_and_its_model_unchanged_and_usable_in_the_callers_loop(server, ran_before):
    world = World(server)
    agent = _agent(world)

    async def main():
        if ran_before:  # the caller's model has an async client of the caller's loop already
            await agent.arun("a first question")
        before = _state(agent)
        result = await judgehooks.aoptimize(agent, world.cases(12), evaluators=[world.judge()],
                                            api_base=server.base_url, **SETTINGS)
        after = _state(agent)
        answers = [await agent.arun(f"question {i} in the caller's loop") for i in range(3)]
        return before, after, result, answers

    before, after, result, answers = asyncio.run(main())
    assert after == before
    assert KEYWORD in result.instructions and result.score_after == 1.0
    assert [a.content for a in answers] == [f"question {i} in the caller's loop" for i in range(3)]
    assert all("error" not in str(a.status).lower() for a in answers)
