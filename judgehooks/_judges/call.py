"""The LLM-judge call: prompt, judge (with retries and a timeout), verdict, as an `Outcome`.

Judge failures are values: after the retry policy gives up, the outcome carries the exception,
which the core stores as an `error` record. `AgentAsJudgeEval` and `Rubric` both grade through it.
"""

from __future__ import annotations

import asyncio
import random
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from .._base.context import EvalContext
from .._base.log import log
from .._base.metering import current_meter
from .._base.outcome import Outcome
from .._base.record import JudgeMode
from .._base.stopwatch import current_stopwatch
from ..exceptions import EvaluatorError, JudgeUnavailable, MalformedVerdict, MissingContext, VerdictCut
from .agreement import check_agreement
from .base import (
    BaseJudge,
    Judge,
    JudgeReply,
    _status_of,
    describe,
    error_kind,
    error_name,
    is_retryable,
    retry_after_seconds,
    shown_url,
)
from .prompt import (
    DEFAULT_PROMPT_BUDGET,
    JudgeRequest,
    PromptCut,
    build_request,
    firmer,
    session_refs,
    session_values,
    single,
)
from .verdict import Verdict, parse_verdict


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How judge calls are retried: `retries` extra attempts, exponential backoff with jitter,
    capped at `max_backoff`; a server's Retry-After is honoured up to that cap."""

    retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0

    def delay(self, attempt: int, exc: BaseException) -> float:
        hinted = retry_after_seconds(exc)
        if hinted is not None:
            return min(hinted, self.max_backoff)
        return min(self.backoff * (2.0 ** (attempt - 1)), self.max_backoff) * (0.5 + random.random() / 2)


_HINTS = {
    "auth": "set the provider's API key variable or pass api_key=... (a local server that needs none: any string)",
    "timeout": "check that api_base (or the agno model's base_url) is the server you meant, or raise timeout=...",
    "connection": "nothing answers there: check api_base (or the agno model's base_url) and that the server runs",
}


class FirstErrors:
    """The kinds of judge error (`error_kind`) an evaluator has met: the first of each kind is
    logged as one warning; later ones of that kind only make their error records."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, object] = {}

    def first(self, kind: str) -> bool:
        mark = object()
        return self._seen.setdefault(kind, mark) is mark  # one atomic step: two threads never both come first


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """One LLM-judge question, frozen at construction: criteria, verdict shape, judge, retries."""

    judge: Judge
    criteria: str
    mode: JudgeMode
    threshold: float | None
    guidelines: tuple[str, ...] = ()
    include_tools: bool = False
    context_key: str | None = None  # run metadata key holding the context an answer must be faithful to
    timeout: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    label: str = ""  # who is asking, for the retry log line
    first_errors: FirstErrors = field(default_factory=FirstErrors, compare=False, repr=False)  # the evaluator's
    prompt_budget: int | None = DEFAULT_PROMPT_BUDGET  # characters of the whole prompt, tool calls included

    def __post_init__(self) -> None:
        session_refs(self.criteria, *self.guidelines)  # a malformed {session_state[...]} is refused now, by name

    def request(self, ctx: EvalContext) -> JudgeRequest:
        context = None if self.context_key is None else ctx.metadata.get(self.context_key)
        if self.context_key is not None and context is None:
            raise MissingContext(f"run metadata has no {self.context_key!r}: this evaluator grades against the "
                                 f"context given there, e.g. agent.run(..., metadata={{{self.context_key!r}: docs}})")
        return build_request(ctx, criteria=self.criteria, mode=single(self.mode), guidelines=self.guidelines,
                             include_tools=self.include_tools, context=context, budget=self.prompt_budget)

    def read(self, verdict: Verdict) -> dict[str, Any]:
        """What the outcome's details keep of a verdict besides pass/fail, score and reason (a
        pairwise verdict's choice)."""
        return {}

    def decide(self, verdict: Verdict) -> bool:
        if self.mode == "numeric":
            assert verdict.score is not None and self.threshold is not None
            return verdict.score >= self.threshold
        assert verdict.passed is not None
        return verdict.passed

    async def ask(self, ctx: EvalContext) -> Outcome:
        """Ask the judge, with retries. Never raises: what fails ends as an error outcome.

        A reply cut at the judge's token cap with no verdict in it (`VerdictCut`) is asked once more,
        at once, with a firmer instruction (`prompt.firmer`); cut again, it is the error.

        Under a spend cap every attempt is admitted first (`current_meter`): a refused retry ends the
        asking with the last attempt's error, a refused first attempt with a `JudgeUnavailable`."""
        attempts = 0
        prompt_tokens: int | None = None
        completion_tokens: int | None = None
        cost: float | None = None
        reply: JudgeReply | None = None
        verdict: Verdict | None = None
        error: BaseException | None = None
        cut: PromptCut | None = None
        said: dict[str, Any] = {}
        used = {"criteria": self.criteria, "mode": self.mode, "threshold": self.threshold}
        if keys := session_refs(self.criteria, *self.guidelines):  # the (redacted) values the judge is given
            said["session_state"] = {k: ctx.session_state[k] for k in keys if k in ctx.session_state}
            try:
                session_values(ctx.session_state, keys)  # a key it lacks: an error now, before any judge or cap
            except MissingContext as exc:
                return Outcome(error=exc, attempts=0, details=said, judge_model=self.judge.model, used=used)
        if isinstance(self.judge, BaseJudge) and _prepares(self.judge):
            # e.g. import litellm (seconds) off the loop, outside the timeout
            stopwatch = current_stopwatch.get()  # and outside the record's latency: setup is not judging
            try:
                with nullcontext() if stopwatch is None else stopwatch.paused():
                    await self.judge.prepare()
            except Exception as exc:
                return Outcome(error=self.failed(exc, 0), attempts=0, judge_model=self.judge.model)
        meter = current_meter.get()
        refused: str | None = None
        firm = False
        while True:
            if meter is not None and not await meter.admit_call():
                refused = meter.refusal()
                if error is None:
                    error = JudgeUnavailable(f"not asked: {refused}")
                else:
                    log.info("judge_retry_refused", evaluator=self.label, run_id=ctx.run_id, attempt=attempts,
                             error_type=error_name(error), note=refused)
                break
            attempts += 1
            try:
                request = self.request(ctx)  # a fresh nonce per attempt
                cut = request.cut
                async with asyncio.timeout(self.timeout):
                    reply = await self.judge.complete(firmer(request) if firm else request)
                if reply.unusable:
                    said["usage"] = f"the judge reported {reply.unusable}: out of bounds, not kept"
                prompt_tokens = _add(prompt_tokens, reply.prompt_tokens)
                completion_tokens = _add(completion_tokens, reply.completion_tokens)
                cost = _add(cost, reply.cost_usd)
                if meter is not None:
                    await meter.add_cost(reply.cost_usd)
                verdict, error = self.parse(reply, request.nonce), None
                if self.mode == "binary":  # the judge's own pass/fail; in numeric mode the threshold decides
                    check_agreement(self.decide(verdict), verdict.reason)  # a pass saying "fails" is no pass
                break
            except Exception as exc:
                verdict, error = None, exc
                if isinstance(exc, VerdictCut) and not firm and attempts <= self.retry.retries:
                    firm = True  # the same question again would run away again: once more, firmly, now
                    continue
                if attempts > self.retry.retries or not is_retryable(exc) or isinstance(exc, VerdictCut):
                    break
                delay = self.retry.delay(attempts, exc)
                log.info("judge_retry", evaluator=self.label, run_id=ctx.run_id, attempt=attempts,
                         error_type=error_name(exc), delay_s=round(delay, 3))
                await anyio.sleep(delay)
        usage: dict[str, Any] = {
            "used": used, "attempts": attempts, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "cost_usd": cost,  # a reply's model as it came (litellm's path checks nothing): a string, or ours
            "judge_model": reply.model if reply is not None and isinstance(reply.model, str) and reply.model
            else self.judge.model}
        if cut is not None:  # cut to its budget: the record says so
            said["prompt"] = cut.details()
        if verdict is not None and reply is not None and reply.finish_reason == "length":
            said["reply"] = f"cut at the judge's token cap ({self._cap()})"  # a verdict before a runaway reason
        if verdict is None:  # a refused call says so: the record's details["spend_cap"]
            assert error is not None
            kept = error if refused and attempts == 0 else self.failed(error, attempts)  # a cap is no judge error
            return Outcome(error=kept, details={**said, "spend_cap": refused} if refused else said, **usage)
        return Outcome(passed=self.decide(verdict), score=verdict.score, reason=verdict.reason,
                       details={**said, **self.read(verdict)}, **usage)

    def parse(self, reply: JudgeReply, nonce: str) -> Verdict:
        """The reply's verdict. A reply cut at the judge's token cap is read like any other (a JSON
        schema puts the verdict before the reason); one with no verdict yet is a `VerdictCut`."""
        try:
            return parse_verdict(reply.text, self.mode, nonce=nonce)
        except MalformedVerdict as exc:
            if reply.finish_reason != "length":
                raise
            raise VerdictCut(
                f"the judge's reply stopped at its token cap ({self._cap()}, finish_reason 'length') after "
                f"{len(reply.text)} characters, before its verdict: a runaway reply. Raise max_tokens (e.g. "
                "litellm_kwargs={'max_tokens': ...}) if the verdicts need more room") from exc

    def _cap(self) -> str:
        cap = self.judge.max_tokens if isinstance(self.judge, BaseJudge) else None
        return f"max_tokens={cap}" if cap else "max_tokens"

    def failed(self, error: BaseException, attempts: int) -> BaseException:
        """The error the record keeps, after the retries: a timeout or connection error restated with
        the judge's URL and the timeout (its type name kept as the record's error_type). The first
        error of each kind this evaluator meets is logged as one warning naming the model, the URL
        and the timeout, so a misconfigured judge speaks once instead of filling the store silently."""
        if isinstance(error, EvaluatorError):  # e.g. MissingContext: the run's, not the judge's
            return error
        kind, where = error_kind(error), shown_url(self.judge) or "the provider's default URL"
        kept = error
        if kind in ("timeout", "connection"):
            tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
            if kind == "timeout":
                text = f"the judge at {where} did not answer within the {self.timeout:g} s timeout ({tries})"
            else:
                text = (f"could not connect to the judge at {where} ({describe(error)}; timeout {self.timeout:g} s, "
                        f"{tries})")
            kept = JudgeUnavailable(text, remote_type=error_name(error))
            kept.__cause__ = error
        if self.first_errors.first(kind):
            # the provider's own words only when no server wrote them (a missing key): a reply's
            # body is not trusted to stay out of logs
            said = describe(error) if _status_of(error) is None and kind == "auth" else None
            log.warning("judge_error", evaluator=self.label, kind=kind, error_type=error_name(error),
                        model=self.judge.model, url=where, timeout_s=self.timeout, attempts=attempts,
                        **({"message": said} if said else {}), **({"fix": _HINTS[kind]} if kind in _HINTS else {}),
                        note="logged once per evaluator and kind; every evaluation still ends as an error record")
        return kept


_N = TypeVar("_N", int, float)


def _add(total: _N | None, value: _N | None) -> _N | None:
    if value is None:
        return total
    return value if total is None else total + value


def _prepares(judge: BaseJudge) -> bool:
    """Whether `judge` has a `prepare` of its own to await (the base one does nothing: not awaiting it
    spares each call a coroutine and a paused stopwatch)."""
    return getattr(judge.prepare, "__func__", None) is not _BASE_PREPARE


_BASE_PREPARE = BaseJudge.prepare  # as defined: a test patching BaseJudge.prepare later is awaited
