"""`align_judge()`: better criteria for an LLM judge, found on human labels, measured on held-out ones.

    result = judgehooks.align_judge(helpful, reflection_model="openai/gpt-4o")   # labels from its store
    result.kappa_before, result.kappa_after                  # Cohen's kappa on held-out labels, with intervals
    helpful = result.evaluator                                # same name and deployment, a new version

The labelled cases are split by `seed`. On the training ones, the judge's disagreements with people
give up to `few_shot` worked examples (added to its guidelines), and gepa rewrites the criteria to
agree more, with the judge's reasons and the reviewers' notes as the reflection model's feedback.
The held-out labels are graded only with the old and the new judge, never shown to gepa or the
reflection model. The new criteria make a new evaluator version: its records say so.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from .._alerts.calibration import human_verdict
from .._base.agreement import Confusion, kappa_interval
from .._base.context import EvalContext, render_content
from .._base.metering import current_meter
from .._base.record import EvalRecord
from .._base.secrets import scrub
from .._evaluators.llm import AgentAsJudgeEval, guidelines_tuple
from .._hooks.settings import HookSettings
from .._judges.text import TextModel
from .._runtime import runtime
from ..stores import Store
from ..stores._base import BaseStore, iter_records
from .cases import MAX_TEXT_CHARS, split
from .echo import echoed
from .reflect import Reflector
from .search import Adapter, Candidate, Search, check_budget
from .settings import check_settings
from .spend import Spend
from .stats import compare, verdict

COMPONENT = "criteria"
#: labels gepa shows the reflection model at a time
MINIBATCH = 3
#: longest worked example in the judge's guidelines, in characters (each of input and output)
EXAMPLE_CHARS = 600


@dataclass(frozen=True, slots=True)
class Labelled:
    """An answer and the people's verdict on it."""

    id: str
    input: str
    output: str
    passed: bool
    expected: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Graded:
    """The judge's verdict on one labelled answer, beside the people's. Its reason and error are
    scrubbed of credentials when made: they reach the reflection model and the result."""

    case: Labelled
    judge_passed: bool | None  # None: the judge could not answer (an error, not a disagreement)
    reason: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        for name in ("reason", "error"):
            if value := getattr(self, name):
                object.__setattr__(self, name, scrub(value))

    @property
    def score(self) -> float:
        return 1.0 if self.judge_passed is not None and self.judge_passed == self.case.passed else 0.0

    def feedback(self) -> str:
        people = "PASS" if self.case.passed else "FAIL"
        if self.judge_passed is None:
            return f"The judge gave no verdict ({self.error}). The people who labelled it said {people}."
        judge = "PASS" if self.judge_passed else "FAIL"
        agree = "agrees" if self.judge_passed == self.case.passed else "DISAGREES"
        note = f" Their note: {scrub(self.case.note)}" if self.case.note else ""
        return f"The judge said {judge} ({self.reason or 'no reason'}); the people said {people}: it {agree}.{note}"

    def data(self) -> dict[str, Any]:
        return {"case": self.case.id, "human": self.case.passed, "judge": self.judge_passed, "reason": self.reason,
                "error": self.error}


@dataclass
class AlignResult:
    """What an alignment found; kappas are Cohen's, on held-out labels, with bootstrap intervals."""

    criteria: str
    original_criteria: str
    examples: list[str]  # worked examples added to the judge's guidelines
    evaluator: AgentAsJudgeEval  # the judge with the new criteria: same name and deployment, new version
    version_before: str
    version_after: str
    kappa_before: float | None
    kappa_before_ci: tuple[float, float] | None
    kappa_after: float | None
    kappa_after_ci: tuple[float, float] | None
    agreement_before: float | None
    agreement_after: float | None
    conclusive: bool
    note: str
    p_value: float | None
    train_size: int
    holdout_size: int
    candidates: list[Candidate]
    history: list[dict[str, Any]]
    stopped: str  # as `OptimizeResult.stopped`
    spend: dict[str, Any]
    # lines, links and e-mail addresses of `criteria` taken verbatim from the labelled cases or the judge's
    # reasons (as `OptimizeResult.echoed`): review these before deploying
    echoed: list[str] = field(default_factory=list)
    reflection_error: str | None = None  # as `OptimizeResult.reflection_error`
    holdout_before: list[dict[str, Any]] = field(default_factory=list, repr=False)
    holdout_after: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def to_json(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in (
            "criteria", "original_criteria", "examples", "version_before", "version_after", "kappa_before",
            "kappa_before_ci", "kappa_after", "kappa_after_ci", "agreement_before", "agreement_after", "conclusive",
            "note", "p_value", "train_size", "holdout_size", "history", "stopped", "spend", "echoed",
            "reflection_error")}
        data["candidates"] = [c.__dict__ for c in self.candidates]
        return data


def _clip(text: str, size: int = MAX_TEXT_CHARS) -> str:
    return text if len(text) <= size else text[:size] + " [...]"


def labelled_of(data: Any, index: int) -> Labelled:
    if not isinstance(data, dict) or "input" not in data or "output" not in data or \
            not isinstance(data.get("passed"), bool):
        raise ValueError(f"labels[{index}] must be a dict with 'input', 'output' and 'passed' (True or False), "
                         f"got {data!r:.120}")
    expected = data.get("expected_output", data.get("expected"))
    note = data.get("note")
    return Labelled(str(data.get("id") or index), _clip(render_content(data["input"])),
                    _clip(render_content(data["output"])), data["passed"],
                    None if expected is None else _clip(render_content(expected)),
                    _clip(note, 2000) if isinstance(note, str) and note else None)


async def labels_in_store(store: Store, evaluator: str, version: str | None) -> list[Labelled]:
    """The labelled graded records of `evaluator` (its newest version, unless `version`), each with
    the reviewers' majority verdict (ties are left out)."""
    if not isinstance(store, BaseStore):
        raise TypeError(f"labels are read from a judgehooks store (BaseStore), got {type(store).__name__}")
    graded: list[EvalRecord] = [r async for r in iter_records(store, evaluator=evaluator)
                                if r.status in ("passed", "failed") and r.rejudge_of is None]
    chosen = version or (graded[0].evaluator_version if graded else None)
    graded = [r for r in graded if r.evaluator_version == chosen]
    by_record: dict[str, list[Any]] = {}
    ids = {r.id for r in graded}
    for label in await store.read_labels():
        if label.record_id in ids:
            by_record.setdefault(label.record_id, []).append(label)
    found = []
    for record in graded:
        if record.id not in by_record:
            continue
        passed, _ = human_verdict(record, by_record[record.id])
        if passed is None:
            continue
        notes = "; ".join(lb.note for lb in by_record[record.id] if lb.note)
        expected = record.metadata.get("expected_output", record.metadata.get("expected"))
        found.append(Labelled(record.id, _clip(record.input), _clip(record.output), passed,
                              expected if isinstance(expected, str) else None, _clip(notes, 2000) or None))
    return found


def example(graded: Graded) -> str:
    """A worked example for the judge's guidelines, from a training disagreement."""
    case = graded.case
    why = f" ({_clip(case.note, 300)})" if case.note else ""
    return (f"Example of a correct verdict: for the input {_clip(case.input, EXAMPLE_CHARS)!r} the answer "
            f"{_clip(case.output, EXAMPLE_CHARS)!r} {'PASSES' if case.passed else 'FAILS'}{why}.")


@dataclass
class _Judging:
    evaluator: AgentAsJudgeEval
    spend: Spend
    guidelines: tuple[str, ...]
    concurrency: int = 4

    async def run(self, cases: Sequence[Labelled], criteria: str) -> list[Graded]:
        call = dataclasses.replace(self.evaluator._call, criteria=criteria, guidelines=self.guidelines)
        results: list[Graded | None] = [None] * len(cases)
        limit = anyio.CapacityLimiter(self.concurrency)

        async def one(i: int) -> None:
            case = cases[i]
            ctx = EvalContext(input=case.input, output=case.output, expected=case.expected, run_id=f"align:{case.id}")
            async with limit:
                token = current_meter.set(self.spend)
                try:
                    outcome = await call.ask(ctx)
                finally:
                    current_meter.reset(token)
            if outcome.status == "error":
                results[i] = Graded(case, None, error=f"{type(outcome.error).__name__}: {outcome.error}")
            else:
                results[i] = Graded(case, bool(outcome.passed), outcome.reason)

        async with anyio.create_task_group() as tg:
            for i in range(len(cases)):
                tg.start_soon(one, i)
        return [r for r in results if r is not None]


def _shown(graded: Graded) -> dict[str, Any]:
    return {"Inputs": {"input": graded.case.input, "answer graded": scrub(graded.case.output)},
            "Generated Outputs": ("no verdict" if graded.judge_passed is None else
                                  f"{'PASS' if graded.judge_passed else 'FAIL'}: {graded.reason or ''}"),
            "Feedback": graded.feedback()}


def _kappa(results: Sequence[Graded], *, seed: int, resamples: int) -> tuple[float | None, Any, float | None]:
    pairs = [(bool(r.judge_passed), r.case.passed) for r in results if r.judge_passed is not None]
    confusion = Confusion.of(pairs)
    return confusion.kappa, kappa_interval(pairs, resamples=resamples, seed=seed), confusion.accuracy


def rebuilt(evaluator: AgentAsJudgeEval, criteria: str, guidelines: Sequence[str]) -> AgentAsJudgeEval:
    """A new judge like `evaluator` (its name, judge and deployment) with other criteria and guidelines."""
    own = ("scoring_strategy", "threshold", "name", "model", "evaluator_agent", "api_base", "api_key", "timeout",
           "retries", "retry_backoff", "temperature", "structured_output", "litellm_kwargs", "include_tool_calls",
           "context_key", "judge_process", "judge_processes")
    settings = evaluator._shell.settings
    deployment = {n: getattr(settings, n) for n in HookSettings.names()}
    judge = evaluator.__dict__.get("_judge_given")
    return AgentAsJudgeEval(criteria=criteria, additional_guidelines=list(guidelines) or None, judge=judge,
                            **{n: getattr(evaluator, n) for n in own}, **deployment)


def align_judge(evaluator: AgentAsJudgeEval, labels: Any = None, *, reflection_model: Any,
                api_base: str | None = None, api_key: str | None = None, store: Store | None = None,
                version: str | None = None, holdout: float = 0.3, seed: int = 0, few_shot: int = 3,
                max_metric_calls: int = 100, max_cost_usd: float | None = None, max_calls: int | None = None,
                concurrency: int = 4, resamples: int = 2000, run_dir: str | None = None,
                timeout: float = 120.0) -> AlignResult:
    """Rewrite `evaluator`'s criteria to agree with people more often.

    `labels`: dicts with ``input``, ``output`` and ``passed`` (the people's verdict; ``note`` and
    ``expected_output`` optional), or None to read the labelled records of this evaluator from `store`
    (default: its own store; the newest version's records unless `version`). `few_shot` worked examples
    come from training disagreements. Spend caps, interruption and `run_dir` act as in `optimize`.
    """
    if not isinstance(evaluator, AgentAsJudgeEval):
        raise TypeError(f"align_judge aligns an AgentAsJudgeEval (an LLM judge with criteria), "
                        f"got {type(evaluator).__name__}")
    check_settings(holdout=holdout, seed=seed, few_shot=few_shot, max_metric_calls=max_metric_calls,
                   max_cost_usd=max_cost_usd, max_calls=max_calls, concurrency=concurrency, resamples=resamples,
                   timeout=timeout)
    if labels is None:
        source = store if store is not None else evaluator.store
        cases = runtime.call(labels_in_store, source, evaluator.evaluator_name, version)
    else:
        cases = [labelled_of(item, i) for i, item in enumerate(labels)]
    train, held = split(cases, holdout, seed)
    check_budget(max_metric_calls, len(train), MINIBATCH)  # before the judge grades a label
    spend = Spend(max_cost_usd=max_cost_usd, max_calls=max_calls)
    model = TextModel(reflection_model, api_base=api_base, api_key=api_key, timeout=timeout)
    base = guidelines_tuple(evaluator.additional_guidelines)
    original = evaluator.criteria
    judging = _Judging(evaluator, spend, base, concurrency)
    reflector = Reflector(model, spend)
    before: list[Graded] = []
    after: list[Graded] = []
    stopped = "interrupted"  # until the search says otherwise
    examples: list[str] = []
    search: Search | None = None
    try:
        before = runtime.call(judging.run, held, original)
        seen = runtime.call(judging.run, train, original)
        wrong = [g for g in seen if g.judge_passed is not None and g.score == 0.0]
        random.Random(seed).shuffle(wrong)
        examples = [example(g) for g in wrong[:few_shot]]
        judging = _Judging(evaluator, spend, base + tuple(examples), concurrency)
        search = Search(COMPONENT, original, train, Adapter(COMPONENT, judging.run, _shown), reflector,
                        spend, max_metric_calls, seed=seed, minibatch_size=MINIBATCH, run_dir=run_dir)
        stopped = spend.stop_reason() or search.run()
        best = search.best().text
        if not spend.interrupted:
            after = before if best == original and not examples else runtime.call(judging.run, held, best)
    except KeyboardInterrupt:
        spend.interrupted = True
        stopped = "interrupted"
    finally:
        runtime.call(model.aclose)
    best = search.best().text if search is not None else original
    result = _result(evaluator, original, best, examples, base, search, before, after, stopped, spend,
                     len(train), len(held), seed, resamples)
    data = [text for case in (*train, *held) for text in (case.input, case.output, case.expected, case.note)]
    result.echoed = echoed(best, original, [*data, *reflector.shown])
    return result


def _result(evaluator: AgentAsJudgeEval, original: str, best: str, examples: list[str], base: tuple[str, ...],
            search: Search | None, before: list[Graded], after: list[Graded], stopped: str, spend: Spend,
            train: int, held: int, seed: int, resamples: int) -> AlignResult:
    k_before, ci_before, acc_before = _kappa(before, seed=seed, resamples=resamples) if before else (None, None, None)
    measured = len(after) == held
    k_after, ci_after, acc_after = _kappa(after, seed=seed, resamples=resamples) if measured else (None, None, None)
    if not measured or not before:
        conclusive, note, p = False, f"not measured: the held-out labels were not all graded ({stopped})", None
    else:
        agree = [None if r.judge_passed is None else r.score == 1.0 for r in before]
        agree_after = [None if r.judge_passed is None else r.score == 1.0 for r in after]
        n, fixed, broken, p = compare(agree, agree_after)
        conclusive, note = verdict(n, fixed, broken, p, what="held-out label")
    if stopped == "reflection_failed":
        note = f"no new criteria were found: {spend.last_reflection_error}; " + note
    new = rebuilt(evaluator, best, base + tuple(examples))
    return AlignResult(
        criteria=best, original_criteria=original, examples=examples, evaluator=new,
        version_before=evaluator.evaluator_version, version_after=new.evaluator_version,
        kappa_before=k_before, kappa_before_ci=ci_before, kappa_after=k_after, kappa_after_ci=ci_after,
        agreement_before=acc_before, agreement_after=acc_after, conclusive=conclusive, note=note, p_value=p,
        train_size=train, holdout_size=held, candidates=search.candidates() if search else [],
        history=search.tracker.history if search else [], stopped=stopped, spend=spend.summary(),
        reflection_error=spend.last_reflection_error,
        holdout_before=[g.data() for g in before], holdout_after=[g.data() for g in after])


async def aalign_judge(evaluator: AgentAsJudgeEval, labels: Any = None, **settings: Any) -> AlignResult:
    """`align_judge` for async callers: the search runs on a worker thread."""
    return await anyio.to_thread.run_sync(functools.partial(align_judge, evaluator, labels, **settings))


__all__ = ("AlignResult", "aalign_judge", "align_judge")
