"""A judge made of an agno Model, or of a caller's evaluator Agent (agno's own API)."""

from __future__ import annotations

from typing import Any

from .._base.context import render_content
from .base import BaseJudge, JudgeReply
from .prompt import JudgeRequest


class AgnoJudge(BaseJudge):
    """Grades with an agno Model, or with a caller's evaluator Agent (agno's own API)."""

    def __init__(self, model: Any = None, evaluator_agent: Any = None) -> None:
        if model is None and evaluator_agent is None:
            raise ValueError("AgnoJudge needs an agno `model` or an `evaluator_agent`")
        self._model = model
        self._agent = evaluator_agent
        source = model if model is not None else getattr(evaluator_agent, "model", None)
        self.model = f"{getattr(source, 'provider', None) or 'agno'}/{getattr(source, 'id', 'model')}"

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        if self._agent is not None:
            # The caller's agent keeps its own instructions; ours travel in the message.
            prompt = "\n\n".join(m["content"] for m in request.messages)
            output = await self._agent.arun(prompt, stream=False)
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
            prompt_tokens=getattr(metrics, "input_tokens", None),
            completion_tokens=getattr(metrics, "output_tokens", None),
            cost_usd=getattr(metrics, "cost", None),
        )
