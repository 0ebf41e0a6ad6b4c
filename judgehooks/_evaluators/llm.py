"""AgentAsJudgeEval: agno's evaluator API, graded by the judgehooks core (the LLM-judge evaluator).

Hook shells, sampling, background dispatch and offline batches come from `Evaluator`; this class
adds agno's parameters and the judge call (`JudgeCall`: prompt, retries, verdict).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Unpack

from .._base.context import EvalContext
from .._base.outcome import Outcome
from .._base.record import EvalRecord
from .._base.validate import check_number, check_optional_number
from .._hooks.deployment import OwnKeywords
from .._hooks.settings import HookSettings
from .._judges.agno import AgnoJudge, evaluator_agent
from .._judges.base import Judge
from .._judges.call import FirstErrors, JudgeCall, RetryPolicy
from .._judges.litellm import LiteLLMJudge
from .._judges.process import ProcessJudge
from .base import Evaluator
from .version import judge_inputs

DEFAULT_MODEL = "openai/gpt-5-mini"  # agno's default judge, through litellm


def check_grading(criteria: Any, scoring_strategy: Any, threshold: Any) -> None:
    """The judge settings every LLM evaluator (and judge template) shares, checked as agno checks
    them (with agno's message): the threshold, any number 1-10, only in numeric mode; binary
    verdicts ignore it. Beyond agno: empty criteria and an unknown strategy are refused."""
    if not isinstance(criteria, str) or not criteria.strip():
        raise ValueError("criteria must be a non-empty string saying what a good output is, "
                         f"got {criteria!r}")
    if scoring_strategy not in ("binary", "numeric"):
        raise ValueError(f"scoring_strategy must be 'binary' or 'numeric', got {scoring_strategy!r}")
    if scoring_strategy == "numeric":
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise ValueError(f"threshold must be between 1 and 10, got {threshold!r} (a number, used in numeric mode)")
        if not 1 <= threshold <= 10:
            raise ValueError(f"threshold must be between 1 and 10, got {threshold}")


def guidelines_tuple(value: str | Sequence[str] | None, name: str = "additional_guidelines") -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(f"{name} must be a string or a list of strings, got {type(value).__name__}")


def _default_name(criteria: str, mode: str, threshold: float | None) -> str:
    # surrogatepass: a lone surrogate in the criteria is refused by the version's check, clearly, not here
    digest = hashlib.sha1(f"{criteria}\x1f{mode}\x1f{threshold}".encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"agent_as_judge-{digest}"


def make_judge(judge: Judge | None, model: Any, *, evaluator_agent: Any = None, api_base: str | None = None,
               api_key: str | None = None, timeout: float = 60.0, temperature: float | None = None,
               structured_output: bool = True, litellm_kwargs: Mapping[str, Any] | None = None,
               judge_process: bool = False, judge_processes: int | None = None,
               explicit_process: bool = False) -> Judge:
    """The judge for an LLM evaluator: the one given; an agno evaluator agent or Model; else a
    litellm model string ($JUDGEHOOKS_MODEL, else agno's default), in a helper process when
    `judge_process` (background grading by default)."""
    if judge is None:
        if evaluator_agent is not None:
            judge = AgnoJudge(evaluator_agent=evaluator_agent)
        elif model is not None and not isinstance(model, str):
            judge = AgnoJudge(model=model)
        else:
            judge = LiteLLMJudge(model or os.environ.get("JUDGEHOOKS_MODEL") or DEFAULT_MODEL,
                                 api_base=api_base, api_key=api_key, timeout=timeout, temperature=temperature,
                                 structured_output=structured_output, litellm_kwargs=litellm_kwargs)
    if not judge_process:
        return judge
    if not isinstance(judge, LiteLLMJudge):
        if explicit_process:
            raise ValueError("judge_process=True needs a litellm model string judge, not an agno Model, "
                             "evaluator_agent or custom judge")
        return judge
    return ProcessJudge(judge, judge_processes or 1)


@dataclass(eq=False, kw_only=True)
class JudgeConnection:
    """How an LLM evaluator reaches and retries its judge: the fields AgentAsJudgeEval and Rubric
    share, declared once."""

    model: Any = None
    judge: Judge | None = None
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 60.0
    retries: int = 2
    retry_backoff: float = 0.5
    temperature: float | None = None
    structured_output: bool = True
    litellm_kwargs: Mapping[str, Any] | None = field(default=None, repr=False)
    include_tool_calls: bool = False
    judge_process: bool | None = None

    def check_connection(self) -> None:
        check_number("timeout", self.timeout, minimum=0, allow_equal=False)
        check_number("retries", self.retries, minimum=0, allow_equal=True, integer=True)
        check_number("retry_backoff", self.retry_backoff, minimum=0, allow_equal=True)
        check_optional_number("temperature", self.temperature, minimum=0)

    def connect(self, settings: HookSettings, *, evaluator_agent: Any = None,
                judge_processes: int | None = None) -> Judge:
        """The judge, now that the deployment is known: in a helper process when this process
        grades in the background (unless `judge_process` says otherwise)."""
        process = settings.judges_here if self.judge_process is None else self.judge_process
        # `judge` holds the judge built last time; the caller's own is remembered apart, so a
        # changed model or api_base builds a new judge rather than keeping the old one.
        given = self.__dict__.get("_judge_given")
        if "_judge_given" not in self.__dict__ or self.judge is not self.__dict__.get("_judge_built"):
            given = self.judge  # first build, or the caller assigned `judge` since
        built = make_judge(given, self.model, evaluator_agent=evaluator_agent, api_base=self.api_base,
                           api_key=self.api_key, timeout=self.timeout, temperature=self.temperature,
                           structured_output=self.structured_output, litellm_kwargs=self.litellm_kwargs,
                           judge_process=process, judge_processes=judge_processes,
                           explicit_process=self.judge_process is not None)
        self.__dict__.update(_judge_given=given, _judge_built=built)
        return built

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(retries=self.retries, backoff=self.retry_backoff)

    @property
    def first_errors(self) -> FirstErrors:
        """The kinds of judge error this evaluator has warned about (one warning per kind, for the
        evaluator's life: its judge calls are rebuilt when a setting is assigned, this is not)."""
        found = self.__dict__.get("_first_errors")
        if found is None:
            found = self.__dict__["_first_errors"] = FirstErrors()
        return found


@dataclass(init=False, eq=False, repr=False)
class AgentAsJudgeEval(Evaluator, JudgeConnection):
    """Grade agno Agent and Team runs with an LLM judge, as a post hook or offline.

    Takes agno's `AgentAsJudgeEval` parameters, in agno's order and with agno's defaults, so
    ``from judgehooks import AgentAsJudgeEval`` is a drop-in swap. Beyond agno's: the deployment
    settings every evaluator takes (``on_error``, ``store``, background grading, sampling, gates:
    see `HookSettings`), the judge's connection and retry settings, ``include_tool_calls`` and
    ``judge`` (any object with ``async complete(request)``, e.g. `judgehooks.testing.FakeJudge`).

    Every evaluation ends as one `EvalRecord` in ``store`` (SQLite by default): passed, failed, or
    error when the judge cannot be reached or read. ``on_fail`` gets failed records and
    ``on_error`` error records, sync or async, from ``run()`` and ``arun()`` alike.
    """

    # agno's fields but the deployment settings agno names (on_fail, print_summary, print_results,
    # file_path_to_save_results, db, run_in_background: fields every evaluator inherits), in agno's order
    criteria: str = ""
    scoring_strategy: Literal["numeric", "binary"] = "binary"
    threshold: float = 7  # agno's: used in numeric mode only (any number 1-10)
    additional_guidelines: str | Sequence[str] | None = None
    name: str | None = None
    model: Any = None
    evaluator_agent: Any = None
    show_spinner: bool = True
    debug_mode: bool = False
    telemetry: bool = True  # accepted for compatibility; judgehooks never sends telemetry
    # the judge's own, beyond JudgeConnection's
    context_key: str | None = None
    judge_processes: int | None = None

    scale = 10.0

    def __init__(
        self,
        criteria: str = "",
        scoring_strategy: Literal["numeric", "binary"] = "binary",
        threshold: float = 7,
        on_fail: Callable[[EvalRecord], Any] | None = None,
        additional_guidelines: str | Sequence[str] | None = None,
        name: str | None = None,
        model: Any = None,
        evaluator_agent: Any = None,
        print_summary: bool = False,
        print_results: bool = False,
        show_spinner: bool = True,
        file_path_to_save_results: str | None = None,
        debug_mode: bool = False,
        db: Any = None,
        telemetry: bool = True,
        run_in_background: bool = False,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        retry_backoff: float = 0.5,
        temperature: float | None = None,
        structured_output: bool = True,
        litellm_kwargs: Mapping[str, Any] | None = None,
        include_tool_calls: bool = False,
        judge: Judge | None = None,
        judge_process: bool | None = None,
        judge_processes: int | None = None,
        context_key: str | None = None,
        **deployment: Unpack[OwnKeywords],
    ) -> None:
        # agno's flat signature, mapped in this one place: the fields above are this evaluator's; the
        # deployment settings (agno's six, and judgehooks' own as keywords) go to Evaluator's fields.
        self.criteria, self.scoring_strategy, self.threshold = criteria, scoring_strategy, threshold
        self.additional_guidelines, self.name = additional_guidelines, name
        self.model, self.evaluator_agent = model, evaluator_agent
        self.show_spinner, self.debug_mode, self.telemetry = show_spinner, debug_mode, telemetry
        self.api_base, self.api_key, self.timeout, self.retries = api_base, api_key, timeout, retries
        self.retry_backoff, self.temperature, self.structured_output = retry_backoff, temperature, structured_output
        self.litellm_kwargs, self.include_tool_calls, self.judge = litellm_kwargs, include_tool_calls, judge
        self.context_key, self.judge_process, self.judge_processes = context_key, judge_process, judge_processes
        self.check()
        super().__init__(name=name, threshold=threshold, on_fail=on_fail, print_summary=print_summary,
                         print_results=print_results, file_path_to_save_results=file_path_to_save_results, db=db,
                         run_in_background=run_in_background, **deployment)

    def check(self) -> None:
        """agno's checks, with agno's messages, and the judge connection's: at construction and
        whenever a setting is assigned."""
        check_grading(self.criteria, self.scoring_strategy, self.threshold)
        guidelines_tuple(self.additional_guidelines)
        built = self.__dict__.get("_judge_built")
        # `judge` holds the built judge until the caller assigns one: check the caller's
        model, judge = self.model, self.__dict__.get("_judge_given") if self.judge is built else self.judge
        if model is not None and not isinstance(model, str) and not hasattr(model, "aresponse"):
            raise TypeError(f"model must be a litellm model string (e.g. 'openai/gpt-4o-mini') or an agno Model, "
                            f"got {type(model).__name__}")
        if judge is not None and not hasattr(judge, "complete"):
            raise TypeError(f"judge must have `async complete(request)`, got {type(judge).__name__}")
        if self.judge_processes is not None:
            check_number("judge_processes", self.judge_processes, minimum=1, allow_equal=True, integer=True)
        if self.context_key is not None and (not isinstance(self.context_key, str) or not self.context_key):
            raise ValueError(f"context_key must be a run metadata key (a non-empty string) or None, "
                             f"got {self.context_key!r}")
        self.check_connection()
        self.mode = self.scoring_strategy  # type: ignore[misc]  # ClassVar set per instance
        self.needs_tools = self.include_tool_calls  # type: ignore[misc]  # ClassVar set per instance

    def _prepare(self, settings: HookSettings) -> None:
        """The judge and the question, from the settings as they are now (again after any of them
        is assigned): the judge in a helper process when this process grades in the background."""
        agent = self.get_evaluator_agent() if self.evaluator_agent is not None else None
        self.judge = self.connect(settings, evaluator_agent=agent, judge_processes=self.judge_processes)
        self._call = JudgeCall(
            judge=self.judge, criteria=self.criteria, mode=self.scoring_strategy, threshold=self.pass_threshold,
            guidelines=guidelines_tuple(self.additional_guidelines), include_tools=self.include_tool_calls,
            context_key=self.context_key, timeout=self.timeout, retry=self.retry,
            label=self.__dict__.get("evaluator_name") or self.name or self.default_name(),
            first_errors=self.first_errors)

    @property
    def pass_threshold(self) -> float | None:
        """The numeric threshold in numeric mode; binary verdicts are pass/fail."""
        return self.threshold if self.scoring_strategy == "numeric" else None

    def default_name(self) -> str:
        return _default_name(self.criteria, self.scoring_strategy, self.pass_threshold)

    def get_evaluator_agent(self) -> Any:
        """agno's method: the agno Agent that judges, with agno's verdict schema as its output.

        The ``evaluator_agent`` you gave (its ``output_schema`` set, as agno does), else one built
        from ``model`` and the criteria. Patch this method, or assign ``evaluator_agent``, and
        every later run is judged by the agent it returns, as in agno (e.g. a mock in your tests).
        A litellm model string is judged without an agent; this returns its agno equivalent.
        """
        return evaluator_agent(self.evaluator_agent, self.model or os.environ.get("JUDGEHOOKS_MODEL") or DEFAULT_MODEL,
                               criteria=self.criteria, mode=self.scoring_strategy,
                               guidelines=guidelines_tuple(self.additional_guidelines), api_base=self.api_base,
                               api_key=self.api_key)

    def version_inputs(self) -> dict[str, Any]:
        return {**super().version_inputs(), **judge_inputs([self._call])}

    def record_metadata(self) -> Mapping[str, Any]:
        if self.additional_guidelines is None:
            return {"criteria": self.criteria}
        return {"criteria": self.criteria, "additional_guidelines": self.additional_guidelines}

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        """Ask the judge (with retries); a judge that cannot be reached or read is an error outcome.
        A patched or overridden `get_evaluator_agent` is asked for the judge on every run, as agno does."""
        call = self._call
        if getattr(type(self).get_evaluator_agent, "__code__", None) is not _OWN_AGENT_CODE or \
                "get_evaluator_agent" in self.__dict__:
            call = replace(call, judge=AgnoJudge(evaluator_agent=self.get_evaluator_agent()))
        return await call.ask(ctx)

    def __repr__(self) -> str:
        return (f"AgentAsJudgeEval(name={self.evaluator_name!r}, scoring_strategy={self.scoring_strategy!r}, "
                f"threshold={self.threshold!r}, judge={self.judge.model if self.judge else None!r})")

    def spec(self) -> dict[str, Any]:
        """What `judgehooks resume` needs to rebuild this evaluator in another process (no secrets)."""
        judge = self.judge
        return {"name": self.evaluator_name, "criteria": self.criteria, "scoring_strategy": self.scoring_strategy,
                "threshold": self.pass_threshold, "additional_guidelines": list(self._call.guidelines),
                "include_tool_calls": self.include_tool_calls, "context_key": self._call.context_key,
                "model": judge.model if isinstance(judge, (LiteLLMJudge, ProcessJudge)) else None,
                "api_base": self.api_base, "timeout": self.timeout, "retries": self.retries,
                "retry_backoff": self.retry_backoff, "temperature": self.temperature,
                "structured_output": self.structured_output}


_OWN_AGENT_CODE = AgentAsJudgeEval.get_evaluator_agent.__code__
