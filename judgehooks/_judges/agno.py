"""A judge made of an agno Model, or of a caller's evaluator Agent (agno's own API)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .._base.caller import sync_caller
from .._base.context import render_content
from .._base.record import JudgeMode, Mode
from ..exceptions import EvaluatorError
from .base import BaseJudge, JudgeReply, count, refuses_structured_output
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
    schema = schema_for(mode)
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


def _reply(text: str, model: str, metrics: Any) -> JudgeReply:
    """A reply with the token counts and cost agno's metrics give (None where they give none)."""
    cost = getattr(metrics, "cost", None)
    return JudgeReply(text=text, model=model, prompt_tokens=count(getattr(metrics, "input_tokens", None)),
                      completion_tokens=count(getattr(metrics, "output_tokens", None)),
                      cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None)


def _content(content: Any) -> str:
    return content if isinstance(content, str) else render_content(content)


def _messages(request: JudgeRequest) -> list[Any]:
    """The request as agno Messages: a fresh list per call (the model appends its answer to it)."""
    from agno.models.message import Message

    return [Message(role=m["role"], content=m["content"]) for m in request.messages]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def schema_for(mode: JudgeMode) -> Any:
    """agno's verdict schema for a scoring strategy (the `output_schema` its judge Agent gets)."""
    from agno.eval.agent_as_judge import BinaryJudgeResponse, NumericJudgeResponse

    return NumericJudgeResponse if mode == "numeric" else BinaryJudgeResponse


def response_format(model: Any, schema: Any) -> Any:
    """What agno's judge Agent asks `model` for when its `output_schema` is `schema` (agno's
    `get_response_format` with an Agent's defaults): the schema itself to a model with native
    structured outputs (agno's OpenAI models send it as a strict ``json_schema``), a ``json_schema``
    dict to one with JSON schema outputs, else JSON mode."""
    if getattr(model, "supports_native_structured_outputs", False) is True:
        return schema
    if getattr(model, "supports_json_schema_outputs", False) is True:
        return {"type": "json_schema",
                "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()}}
    return {"type": "json_object"}


def verdict_text(content: Any, parsed: Any, schema: Any) -> str:
    """A model's reply as the text `parse_verdict` reads, after what agno's own parsing removes.

    agno reads its judge's reply with `parse_response_model_str`: the reply as the schema's JSON,
    after a reasoning model's ``<think>...</think>``. A reply that opens with its thinking and then
    is the schema's JSON is passed on as that JSON (nonce and all: no field is dropped here); any
    other reply goes on whole, to the nonce-aware reading, never to agno's merge of every JSON object
    in the text (which a quoted, forged verdict could win)."""
    if not isinstance(content, str) or not content.strip():
        if parsed is not None and isinstance(parsed, schema):
            return str(parsed.model_dump_json())
        return render_content(content)
    stripped = content.strip()
    if stripped.startswith("<think>") and "</think>" in stripped:
        answer = stripped.split("</think>", 1)[1].strip()
        try:
            schema.model_validate_json(answer)
        except ValueError:  # pydantic's ValidationError is one
            return content
        return answer
    return content


def metrics_provider(model: Any) -> str | None:
    """The provider as agno's metrics name it (`Model.get_provider()`: "OpenAI Chat" for OpenAIChat)."""
    get = getattr(model, "get_provider", None)
    try:
        found = get() if callable(get) else None
    except Exception:  # a mock or a half-built model: fall back to its `provider`
        found = None
    return _text(found) or _text(getattr(model, "provider", None))


async def _run_agent(agent: Any, prompt: str, in_order: anyio.Lock) -> Any:
    """One run of the evaluator agent, as agno's evaluator makes it: its sync `run` (on a worker
    thread) when a sync caller asked for the grading (`run()`, a sync post hook), its `arun` when an
    async one did, as agno's `run()` and `arun()` do (tests mock the one their caller uses). An
    object whose `arun` is no coroutine function (a mock with only `run`) is run with `run`.

    A `run` that is a `unittest.mock` mock takes `in_order` (a fair lock): one call at a time, in
    the order the cases reached the judge, as agno's `run(cases=...)` makes them, so a `side_effect`
    list answers case i with its i-th answer (worker threads would call it in any order). A real
    agent's `run` is not queued: the wait would count against each case's judge timeout."""
    from agno.agent import Agent
    from agno.team import Team

    arun = getattr(agent, "arun", None)
    if not sync_caller() and (isinstance(agent, (Agent, Team)) or inspect.iscoroutinefunction(arun)):
        output = arun(prompt, stream=False)  # type: ignore[misc]
        return await output if inspect.isawaitable(output) else output
    if type(getattr(agent, "run", None)).__module__ != "unittest.mock":
        return await anyio.to_thread.run_sync(lambda: agent.run(prompt, stream=False), abandon_on_cancel=True)
    async with in_order:
        return await anyio.to_thread.run_sync(lambda: agent.run(prompt, stream=False), abandon_on_cancel=True)


class AgnoJudge(BaseJudge):
    """Grades with an agno Model, or with a caller's evaluator Agent (agno's own API).

    A Model is asked for agno's verdict schema as agno's judge Agent asks it (`response_format`), and
    asked again without it when the server refuses structured output (HTTP 400), as `LiteLLMJudge` is.
    """

    def __init__(self, model: Any = None, evaluator_agent: Any = None) -> None:
        if model is None and evaluator_agent is None:
            raise ValueError("AgnoJudge needs an agno `model` or an `evaluator_agent`")
        self._model = model
        self._agent = evaluator_agent
        self._in_order: anyio.Lock | None = None  # made on first use, on the loop that grades
        source = model if model is not None else getattr(evaluator_agent, "model", None)
        self._source = source
        # the provider as agno's metrics name the judge (get_provider(): "OpenAI Chat" for OpenAIChat)
        self.model = f"{metrics_provider(source) or 'agno'}/{_text(getattr(source, 'id', None)) or 'model'}"

    @property
    def endpoint(self) -> str | None:
        """The agno model's ``base_url`` (or ``api_base`` / ``host``), or None for its provider's default."""
        for name in ("base_url", "api_base", "host"):
            value = getattr(self._source, name, None)
            if value is not None and not callable(value) and str(value):
                return str(value)
        return None

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        if self._agent is not None:
            # The caller's agent keeps its own instructions; ours travel in the message.
            prompt = "\n\n".join(m["content"] for m in request.messages)
            if self._in_order is None:
                self._in_order = anyio.Lock()
            output = await _run_agent(self._agent, prompt, self._in_order)
            text, metrics = _content(output.content), output.metrics
        else:
            if request.mode == "pairwise":
                raise EvaluatorError("an agno Model judges pass/fail and scores: a pairwise comparison (Shadow) "
                                     "needs a litellm model string judge (judge_model='provider/model')")
            schema = schema_for(request.mode)
            response = await self._ask_model(request, response_format(self._model, schema))
            text = verdict_text(response.content, getattr(response, "parsed", None), schema)
            metrics = getattr(response, "response_usage", None)
        return _reply(text or "", self.model, metrics)

    async def complete_text(self, request: JudgeRequest) -> JudgeReply:
        """The Model's free-text reply to the request's messages, with no response format (what
        `optimize` asks a reflection model)."""
        if self._model is None:
            raise TypeError("complete_text needs an agno Model, not an evaluator agent")
        response = await self._model.aresponse(messages=_messages(request))
        return _reply(_content(response.content), self.model, getattr(response, "response_usage", None))

    async def _ask_model(self, request: JudgeRequest, fmt: Any) -> Any:
        try:
            return await self._model.aresponse(messages=_messages(request), response_format=fmt)
        except Exception as exc:
            if not refuses_structured_output(exc):
                raise
        return await self._model.aresponse(messages=_messages(request))
