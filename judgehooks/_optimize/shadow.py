"""Shadow: try a candidate agent on live traffic, judged blind against the live answer.

``Shadow(candidate, judge_model=...)`` goes in a live agent's or team's ``post_hooks``. For each
sampled run it is an evaluator like any other, on the same admission path: the hook snapshots the
run and files a job in the durable outbox (``run_in_background=True`` by default), and the
background worker grades it: the candidate answers the run's input, then a pairwise judge
(`_judges.pairwise`) says which answer is better, seeing them as A and B in an order drawn at
random per comparison. The record's ``details["winner"]`` is "live", "candidate" or "tie", with the
candidate's answer beside it. The live answer is never changed or delayed beyond what any
background evaluator costs; `judgehooks.drain()` waits for the comparisons.

The candidate's run and the judge's call are each admitted by the grading's meter, so the spend
caps (``max_calls``, ``max_cost_usd``) and ``requests_per_minute`` count both. A candidate that
fails, a judge that cannot answer and a spend cap reached are ``error`` records: never a win or a
loss for either side.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Unpack

from .._base.context import EvalContext, render_content
from .._base.metering import current_meter
from .._base.outcome import Outcome
from .._base.record import EvalRecord
from .._base.text import storable
from .._base.validate import check_number
from .._evaluators.base import Evaluator
from .._evaluators.fields import stable_name
from .._evaluators.llm import make_judge
from .._hooks.deployment import OwnKeywords
from .._hooks.settings import HookSettings
from .._judges.base import Judge
from .._judges.call import FirstErrors, RetryPolicy
from .._judges.pairwise import DEFAULT_PAIRWISE_CRITERIA, PairwiseCall, build_pairwise_request
from ..exceptions import EvaluatorError, JudgeUnavailable, RedactionError
from .trial import close_models, copy_with

#: the record's ``details["winner"]`` for the judge's choice, by which side was shown as A
_WINNERS = {(True, "A"): "live", (True, "B"): "candidate", (False, "A"): "candidate", (False, "B"): "live"}
#: a comparison's score: the candidate's share of the win
_SCORES = {"candidate": 1.0, "tie": 0.5, "live": 0.0}


def _is_agent(value: Any) -> bool:
    """An agno Agent or Team, by its shape (only a few folders import agno)."""
    return callable(getattr(value, "deep_copy", None)) and callable(getattr(value, "arun", None))


def _is_optimize_result(value: Any) -> bool:
    return isinstance(getattr(value, "instructions", None), str) and hasattr(value, "original_instructions")


def _model_id(model: Any) -> str | None:
    """A model's name without its provider: "openai/gpt-4o", "openai:gpt-4o" and an agno model
    whose id is "gpt-4o" all give "gpt-4o"."""
    found = model if isinstance(model, str) else getattr(model, "id", None)
    if not isinstance(found, str) or not found:
        return None
    return found.replace(":", "/").rsplit("/", 1)[-1].strip().lower()


def _models_of(owner: Any) -> list[Any]:
    """The models that answer for an agent or team: its own and its members'."""
    found = [getattr(owner, "model", None)]
    for member in getattr(owner, "members", None) or ():
        found += _models_of(member)
    return [m for m in found if m is not None]


@dataclass(init=False, eq=False, repr=False)
class Shadow(Evaluator):
    """Shadow A/B on live traffic: a candidate answers each sampled run's input in the background,
    and a blind pairwise judge says which answer is better; see `judgehooks.shadow_report`.

    ``candidate`` is an agno Agent or Team, or an `OptimizeResult` (its instructions on a copy of the
    live agent); or leave it out and give overrides (``instructions=``, ``model=``) for a copy of the
    live agent. A judge model that is also the live or the candidate agent's model is refused
    (self-preference), unless ``allow_self_judging=True``.
    """

    candidate: Any = None
    judge_model: str | None = None
    criteria: str = DEFAULT_PAIRWISE_CRITERIA
    instructions: Any = None
    model: Any = None
    allow_self_judging: bool = False
    judge: Judge | None = None
    api_base: str | None = None
    api_key: str | None = None
    timeout: float = 60.0
    retries: int = 2
    retry_backoff: float = 0.5
    candidate_timeout: float = 300.0

    needs_tools = False
    #: a comparison is no live verdict: nothing here goes to the review queue
    routes_to_review = False

    def __init__(self, candidate: Any = None, *, judge_model: str | None = None,
                 criteria: str = DEFAULT_PAIRWISE_CRITERIA, instructions: Any = None, model: Any = None,
                 allow_self_judging: bool = False, judge: Judge | None = None, api_base: str | None = None,
                 api_key: str | None = None, timeout: float = 60.0, retries: int = 2, retry_backoff: float = 0.5,
                 candidate_timeout: float = 300.0, name: str | None = None, on_fail: Callable[[EvalRecord], Any] |
                 None = None, run_in_background: bool = True, **deployment: Unpack[OwnKeywords]) -> None:
        self.candidate, self.judge_model, self.criteria = candidate, judge_model, criteria
        self.instructions, self.model, self.allow_self_judging = instructions, model, allow_self_judging
        self.judge, self.api_base, self.api_key, self.timeout = judge, api_base, api_key, timeout
        self.retries, self.retry_backoff, self.candidate_timeout = retries, retry_backoff, candidate_timeout
        self.name = name
        # the live agent last seen under each id and name, held (not weakly: a comparison runs after
        # the run returned, when the app may have dropped its agent, e.g. one made per request); one per
        # id or name, so AgentOS's copy of the agent per request replaces the one before
        self.__dict__["_live"] = {}
        self.__dict__["_live_lock"] = threading.Lock()
        self.check()
        routing = sorted(set(deployment) & {"review_margin", "review_sample_rate"})
        if routing:
            raise ValueError(f"Shadow takes no {', '.join(routing)}: its comparisons are never routed to the review "
                             "queue (only live verdicts are)")
        settings: dict[str, Any] = {"sample_rate": 0.1, **deployment}
        super().__init__(name=name, on_fail=on_fail, run_in_background=run_in_background, **settings)

    # ---- settings -------------------------------------------------------------------------------

    def check(self) -> None:
        """Each setting, at construction and when assigned."""
        candidate = self.candidate
        if candidate is not None and not _is_agent(candidate) and not _is_optimize_result(candidate):
            raise TypeError(f"Shadow's candidate must be an agno Agent or Team or an OptimizeResult, got "
                            f"{type(candidate).__name__} (or leave it out and give instructions= or model=)")
        if candidate is None and self.instructions is None and self.model is None:
            raise ValueError("Shadow needs a candidate: an agno Agent or Team, an OptimizeResult, or overrides "
                             "for a copy of the live agent (instructions=..., model=...)")
        if _is_optimize_result(candidate) and self.instructions is not None:
            raise ValueError("Shadow takes an OptimizeResult's instructions or instructions=..., not both")
        if self.instructions is not None and not isinstance(self.instructions, (str, list)):
            raise TypeError(f"instructions must be a string or a list of strings, "
                            f"got {type(self.instructions).__name__}")
        if not isinstance(self.criteria, str) or not self.criteria.strip():
            raise ValueError(f"criteria must be a non-empty string saying what a better answer is, "
                             f"got {self.criteria!r}")
        if self.judge is None and (not isinstance(self.judge_model, str) or not self.judge_model.strip()):
            raise ValueError("Shadow needs judge_model: a litellm model string (e.g. 'openai/gpt-4o-mini') for the "
                             f"pairwise judge, got {self.judge_model!r}")
        if self.judge is not None and not hasattr(self.judge, "complete"):
            raise TypeError(f"judge must have `async complete(request)`, got {type(self.judge).__name__}")
        if not isinstance(self.allow_self_judging, bool):
            raise TypeError(f"allow_self_judging must be True or False, got {self.allow_self_judging!r}")
        check_number("timeout", self.timeout, minimum=0, allow_equal=False)
        check_number("candidate_timeout", self.candidate_timeout, minimum=0, allow_equal=False)
        check_number("retries", self.retries, minimum=0, allow_equal=True, integer=True)
        check_number("retry_backoff", self.retry_backoff, minimum=0, allow_equal=True)
        for model in [self.model, *(_models_of(candidate) if _is_agent(candidate) else [])]:
            why = self._self_judging(model, "the candidate agent's")
            if why is not None:
                raise ValueError(why)

    def _self_judging(self, model: Any, whose: str) -> str | None:
        """Why judging with `model`'s judge is refused (None: it is not the judge's model, or allowed)."""
        judge_model = self.judge_model if self.judge is None else getattr(self.judge, "model", None)
        if self.allow_self_judging or model is None or _model_id(model) is None:
            return None
        if _model_id(model) != _model_id(judge_model):
            return None
        return (f"the judge model {judge_model!r} is also {whose} model {_model_id(model)!r}: a judge prefers its "
                "own answers (self-preference); choose another judge_model, or pass allow_self_judging=True")

    def _prepare(self, settings: HookSettings) -> None:
        if settings.gate:
            raise ValueError("Shadow never changes the live answer: gate=True is refused (a gate would block the "
                             "live answer whenever the candidate's was judged better)")
        if not settings.run_in_background:
            raise ValueError("Shadow compares in the background, so the live answer never waits for the candidate "
                             "and the judge: run_in_background=False is refused")
        self.__dict__["_judge"] = make_judge(self.judge, self.judge_model, api_base=self.api_base,
                                             api_key=self.api_key, timeout=self.timeout)
        self.__dict__["_call"] = PairwiseCall(
            judge=self.__dict__["_judge"], criteria=self.criteria, mode="pairwise", threshold=None,
            timeout=self.timeout, retry=RetryPolicy(retries=self.retries, backoff=self.retry_backoff),
            label=self.__dict__.get("evaluator_name") or self.name or self.default_name(),
            first_errors=self.__dict__.setdefault("_first_errors", FirstErrors()))

    @property
    def pairwise_judge(self) -> Judge:
        """The judge the comparisons ask (built from judge_model, or the one given)."""
        judge: Judge = self.__dict__["_judge"]
        return judge

    def _describe_candidate(self) -> dict[str, Any]:
        candidate = self.candidate
        said: dict[str, Any] = {}
        if _is_agent(candidate):
            said["agent"] = (getattr(candidate, "name", None) or getattr(candidate, "id", None)
                             or type(candidate).__name__)
        instructions = candidate.instructions if _is_optimize_result(candidate) else self.instructions
        if instructions is not None:
            said["instructions"] = instructions if isinstance(instructions, str) else list(instructions)
        if self.model is not None:
            said["model"] = self.model if isinstance(self.model, str) else getattr(self.model, "id", None)
        return said

    def default_name(self) -> str:
        return stable_name("shadow", {"criteria": self.criteria, "judge_model": self.judge_model,
                                      **self._describe_candidate()})

    def version_inputs(self) -> dict[str, Any]:
        """The pairwise prompt's wording (placeholders for the texts and the nonce), the judge model and
        the candidate: a comparison under another of these is not pooled with these unnoticed."""
        prompt = build_pairwise_request("{input}", "{a}", "{b}", criteria=self.criteria, nonce="{nonce}")
        return {"prompt": [m["content"] for m in prompt.messages],
                "judge_model": self.judge_model or getattr(self.judge, "model", None),
                "candidate": self._describe_candidate()}

    def record_metadata(self) -> Mapping[str, Any]:
        return {"criteria": self.criteria}

    def spec(self) -> dict[str, Any] | None:
        """None: the candidate is an agent (or a copy of the live one), which only the module that
        constructs it can build: `judgehooks resume --import MODULE` grades a dead process's jobs."""
        return None

    @property
    def pass_threshold(self) -> float | None:
        return None

    # ---- the live agent ------------------------------------------------------------------------

    def _remember(self, agent: Any, team: Any) -> None:
        owner = agent if agent is not None else team
        if owner is None:
            return
        with self.__dict__["_live_lock"]:
            for key in {getattr(owner, "id", None), getattr(owner, "name", None)} - {None}:
                self.__dict__["_live"][key] = owner

    def _live_agent(self, ctx: EvalContext) -> Any:
        live = self.__dict__["_live"]
        with self.__dict__["_live_lock"]:
            for key in (ctx.agent_id, ctx.team_id, ctx.agent_name, ctx.team_name):
                if key is not None and key in live:
                    return live[key]
            owners = {id(v): v for v in live.values()}
        return next(iter(owners.values())) if len(owners) == 1 else None

    def post_check(self, run_output: Any, agent: Any = None, team: Any = None, user_id: str | None = None,
                   metadata: Mapping[str, Any] | None = None, run_context: Any = None) -> None:
        self._remember(agent, team)
        super().post_check(run_output, agent, team, user_id, metadata, run_context)

    async def async_post_check(self, run_output: Any, agent: Any = None, team: Any = None,
                               user_id: str | None = None, metadata: Mapping[str, Any] | None = None,
                               run_context: Any = None) -> None:
        self._remember(agent, team)
        await super().async_post_check(run_output, agent, team, user_id, metadata, run_context)

    # ---- one comparison -------------------------------------------------------------------------

    def _candidate_for(self, ctx: EvalContext) -> tuple[Any, dict[str, Any]]:
        """The agent to copy and the overrides for its copy; raises EvaluatorError naming why not."""
        candidate = self.candidate
        update: dict[str, Any] = {}
        if _is_optimize_result(candidate):
            update["instructions"] = candidate.instructions
        elif self.instructions is not None:
            update["instructions"] = self.instructions
        if self.model is not None:
            update["model"] = self.model
        live = self._live_agent(ctx)
        if live is not None:
            for model in _models_of(live):
                why = self._self_judging(model, "the live agent's")
                if why is not None:
                    raise EvaluatorError(why)
        if _is_agent(candidate):
            return candidate, update
        if live is None:
            raise EvaluatorError(
                "the candidate is a copy of the live agent, and no run of the live agent has reached this Shadow in "
                "this process (e.g. `judgehooks resume` after a crash): give Shadow an agno Agent as the candidate to "
                "resume its comparisons elsewhere")
        return live, update

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        """Run the candidate on the run's input, then ask the pairwise judge (blind, random order)."""
        try:
            base, update = self._candidate_for(ctx)
        except EvaluatorError as exc:
            return Outcome(error=exc)
        described = self._describe_candidate()
        meter = current_meter.get()
        if meter is not None and not await meter.admit_call():  # the candidate's run is a call like the judge's
            refused = meter.refusal()
            return Outcome(error=JudgeUnavailable(f"the candidate was not run: {refused}"),
                           details={"spend_cap": refused, "candidate": described})
        answer, run_cost, error = await self._run_candidate(base, update, ctx.input)
        if meter is not None and run_cost is not None:
            await meter.add_cost(run_cost)
        if error is None:
            answer, error = self._redacted(answer)
        if error is not None:
            return Outcome(error=error, cost_usd=run_cost, details={"candidate": described})
        live_first = secrets.randbelow(2) == 0
        first, second = (ctx.output, answer) if live_first else (answer, ctx.output)
        call: PairwiseCall = replace(self.__dict__["_call"], first=first, second=second)
        asked = await call.ask(ctx)
        details = {k: v for k, v in asked.details.items() if k != "choice"}
        details.update(candidate=described, candidate_output=answer, candidate_cost_usd=run_cost,
                       shown_as_a="live" if live_first else "candidate")
        cost = None if asked.cost_usd is None and run_cost is None else (asked.cost_usd or 0.0) + (run_cost or 0.0)
        used = {"criteria": self.criteria, "mode": "binary", "threshold": None}
        if asked.error is not None:
            return replace(asked, details=details, cost_usd=cost, used=used)
        winner = _WINNERS.get((live_first, asked.details.get("choice", ""))) or "tie"
        details["winner"] = winner
        return replace(asked, passed=winner != "live", score=_SCORES[winner], details=details, cost_usd=cost,
                       used=used)

    def _redacted(self, answer: str) -> tuple[str, BaseException | None]:
        """The candidate's answer through `redact=`, as the live run's text went: the judge and the store
        see both answers redacted alike. A redactor that raises withholds it (its type only is said)."""
        redact = self.hook_settings.redact
        if redact is None:
            return answer, None
        try:
            found = redact(answer)
            if not isinstance(found, str):
                raise TypeError(f"a redactor returns text, got {type(found).__name__}")
            return storable(found), None
        except Exception as exc:  # never the message: it may quote the text
            return "", RedactionError(f"the redactor raised {type(exc).__name__} on the candidate's answer; the "
                                      "answer was withheld from the judge and the store")

    async def _run_candidate(self, base: Any, update: dict[str, Any], question: str
                             ) -> tuple[str, float | None, BaseException | None]:
        """The candidate's answer to `question`, from a copy of `base` (no post hooks, no db, models of
        its own, so nothing of the live agent's sessions or clients is touched); its cost; or the error."""
        shared = self.__dict__.setdefault("_models", {})  # per event loop: a model's client belongs to one
        try:
            copy, models = copy_with(base, update, shared.setdefault(asyncio.get_running_loop(), {}))
        except Exception as exc:
            return "", None, EvaluatorError(f"the candidate could not be copied: {type(exc).__name__}: {exc}")
        try:
            async with asyncio.timeout(self.candidate_timeout):
                output = await copy.arun(question, stream=False)
        except Exception as exc:
            what = (f"did not answer within {self.candidate_timeout:g} s" if isinstance(exc, TimeoutError)
                    else f"raised {type(exc).__name__}: {exc}")
            return "", None, EvaluatorError(f"the candidate's run {what}")
        finally:
            await close_models(models)
        metrics = getattr(output, "metrics", None)
        cost = getattr(metrics, "cost", None)
        cost = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
        status = str(getattr(getattr(output, "status", None), "value", getattr(output, "status", "")) or "").lower()
        answer = render_content(getattr(output, "content", None))
        if "error" in status:
            return answer, cost, EvaluatorError(f"the candidate's run ended with status error: {answer[:500]}")
        return answer, cost, None

    def __repr__(self) -> str:
        return f"Shadow(name={self.evaluator_name!r}, candidate={self._describe_candidate()!r})"
