"""A judge made of an agno Model, or of a caller's evaluator Agent (agno's own API)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from .._base.context import render_content
from .._base.record import Mode
from .base import BaseJudge, JudgeReply
from .prompt import JudgeRequest

if TYPE_CHECKING:
    from agno.eval.agent_as_judge import BinaryJudgeResponse as BinaryJudgeResponse
    from agno.eval.agent_as_judge import NumericJudgeResponse as NumericJudgeResponse

#: agno's verdict schemas, re-exported as they are: an agno Model judge is asked for these
SCHEMAS = ("BinaryJudgeResponse", "NumericJudgeResponse")


def __getattr__(name: str) -> Any:
    """`NumericJudgeResponse` and `BinaryJudgeResponse`: agno's classes themselves (the output
    schema `evaluator_agent` sets), imported on first use so this module does not load agno.eval."""
    if name in SCHEMAS:
        from agno.eval import agent_as_judge

        return getattr(agent_as_judge, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_DESCRIPTION = "You are an expert evaluator. Score outputs objectively based on the provided criteria."


def evaluator_agent(agent: Any, model: Any, *, criteria: str, mode: Mode, guidelines: Sequence[str],
                    api_base: str | None = None, api_key: str | None = None) -> Any:
    """What agno's `AgentAsJudgeEval.get_evaluator_agent()` returns: the caller's agent with agno's
    verdict schema as its output, or an agno Agent built from `model` (a litellm model string
    becomes agno's `LiteLLM` model) with the criteria as its instructions."""
    from agno.eval.agent_as_judge import BinaryJudgeResponse, NumericJudgeResponse

    schema = NumericJudgeResponse if mode == "numeric" else BinaryJudgeResponse
    if agent is not None:
        agent.output_schema = schema
        return agent
    from agno.agent import Agent

    if isinstance(model, str):
        from agno.models.litellm import LiteLLM

        model = LiteLLM(id=model, api_base=api_base, api_key=api_key)
    scoring = (["## Scoring (1-10)", "Give a score from 1 (fails the criteria) to 10 (fully meets them)."]
               if mode == "numeric" else ["## Evaluation", "Decide whether the output PASSES or FAILS the criteria."])
    extra = ["", "## Additional Guidelines", *(f"- {g}" for g in guidelines)] if guidelines else []
    instructions = "\n".join(["## Criteria", criteria, "", *scoring, *extra, "",
                              "Be objective and thorough in your evaluation."])
    return Agent(model=model, description=_DESCRIPTION, instructions=instructions, output_schema=schema)


def _count(value: Any) -> int | None:
    """A token count from a judge's metrics, or None (a mock's attribute is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _cost(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


async def _run_agent(agent: Any, prompt: str) -> Any:
    """One run of the evaluator agent: awaited when it is an agno Agent or Team or has a coroutine
    `arun`; else its sync `run` on a worker thread (a test's mock agent configures `run`)."""
    from agno.agent import Agent
    from agno.team import Team

    arun = getattr(agent, "arun", None)
    if isinstance(agent, (Agent, Team)) or inspect.iscoroutinefunction(arun):
        output = arun(prompt, stream=False)  # type: ignore[misc]
        return await output if inspect.isawaitable(output) else output
    return await anyio.to_thread.run_sync(lambda: agent.run(prompt, stream=False))


class AgnoJudge(BaseJudge):
    """Grades with an agno Model, or with a caller's evaluator Agent (agno's own API)."""

    def __init__(self, model: Any = None, evaluator_agent: Any = None) -> None:
        if model is None and evaluator_agent is None:
            raise ValueError("AgnoJudge needs an agno `model` or an `evaluator_agent`")
        self._model = model
        self._agent = evaluator_agent
        source = model if model is not None else getattr(evaluator_agent, "model", None)
        provider, model_id = getattr(source, "provider", None), getattr(source, "id", None)
        self.model = (f"{provider if isinstance(provider, str) and provider else 'agno'}/"
                      f"{model_id if isinstance(model_id, str) and model_id else 'model'}")

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        if self._agent is not None:
            # The caller's agent keeps its own instructions; ours travel in the message.
            prompt = "\n\n".join(m["content"] for m in request.messages)
            output = await _run_agent(self._agent, prompt)
            content = output.content
            metrics = output.metrics
        else:
            from agno.models.message import Message

            messages = [Message(role=m["role"], content=m["content"]) for m in request.messages]
            response = await self._model.aresponse(messages=messages)
            content = response.content
            metrics = getattr(response, "response_usage", None)
        if content is not None and not isinstance(content, str):
            content = render_content(content)
        return JudgeReply(
            text=content or "",
            model=self.model,
            prompt_tokens=_count(getattr(metrics, "input_tokens", None)),
            completion_tokens=_count(getattr(metrics, "output_tokens", None)),
            cost_usd=_cost(getattr(metrics, "cost", None)),
        )
