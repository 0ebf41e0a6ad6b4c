"""`optimize()`: better instructions for an agent or team, found on graded cases, measured on held-out ones.

    result = judgehooks.optimize(agent, "failures.jsonl", evaluators=[helpful],
                                 reflection_model="openai/gpt-4o", max_metric_calls=150)
    result.score_before, result.score_after, result.conclusive   # held-out pass rates, and whether they say much
    print(result.diff())                                          # the old instructions against the new

The cases are split by `seed` into training cases, which gepa runs candidates on and the reflection
model reads (answers, verdicts, reasons), and held-out cases, run only twice: with the agent's own
instructions and with the best candidate. The agent is copied for every run and never changed.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from .._judges.text import TextModel
from .._runtime import runtime
from ..stores import RecordFilter
from .cases import Case, load_cases, split
from .echo import echoed
from .reflect import Reflector
from .runner import CaseResult, Runner, check_agent, instructions_of
from .search import Adapter, Candidate, Search
from .settings import check_settings
from .spend import Spend
from .stats import compare, verdict

COMPONENT = "instructions"


@dataclass
class OptimizeResult:
    """What an optimization found. Pass rates are over held-out cases the evaluators graded (a judge
    error is no failure: those cases are left out and counted in `holdout_errors`)."""

    instructions: str  # the best candidate (the agent's own when nothing beat it)
    original_instructions: str
    score_before: float | None  # held-out pass rate with the original instructions
    score_after: float | None  # held-out pass rate with `instructions` (None: not measured, see `note`)
    conclusive: bool  # whether the held-out comparison says anything (enough cases, a significant change)
    note: str  # why, in a sentence
    p_value: float | None
    train_size: int
    holdout_size: int
    holdout_errors: int
    candidates: list[Candidate]
    history: list[dict[str, Any]]
    stopped: str  # why the search stopped: "budget" (max_metric_calls had no room for another try), "perfect"
    #               (a candidate passed every training case), "max_calls", "max_cost_usd", "interrupted",
    #               "reflection_failed" (a reflection call failed and no candidate came: `reflection_error` says why)
    spend: dict[str, Any]
    # lines, links and e-mail addresses of `instructions` taken verbatim from case data (inputs, answers,
    # reasons): a case may carry text meant to steer the reflection model; review these before deploying
    echoed: list[str] = field(default_factory=list)
    # why the reflection model last failed (its kind, URL and message, credentials masked), or None
    reflection_error: str | None = None
    holdout_before: list[dict[str, Any]] = field(default_factory=list, repr=False)
    holdout_after: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def improved(self) -> bool:
        """A conclusive improvement on the held-out cases."""
        return (self.conclusive and self.score_before is not None and self.score_after is not None
                and self.score_after > self.score_before)

    @property
    def reflection_never_answered(self) -> bool:
        """The reflection model was asked and never answered (`reflection_error` says why): the
        instructions are the original, and nothing was tried."""
        return bool(self.spend.get("reflection_failures")) and not self.spend.get("reflection_answers")

    def diff(self) -> str:
        """The original instructions against the new ones, as a unified diff."""
        def lines(text: str) -> list[str]:
            return [line if line.endswith("\n") else line + "\n" for line in text.splitlines(keepends=True)]

        return "".join(difflib.unified_diff(lines(self.original_instructions), lines(self.instructions),
                                            "instructions (original)", "instructions (optimized)"))

    def to_json(self) -> dict[str, Any]:
        return {"instructions": self.instructions, "original_instructions": self.original_instructions,
                "score_before": self.score_before, "score_after": self.score_after, "improved": self.improved,
                "conclusive": self.conclusive, "note": self.note, "p_value": self.p_value,
                "train_size": self.train_size, "holdout_size": self.holdout_size,
                "holdout_errors": self.holdout_errors, "stopped": self.stopped, "spend": self.spend,
                "echoed": self.echoed, "reflection_error": self.reflection_error,
                "candidates": [c.__dict__ for c in self.candidates], "history": self.history}


def _pass_rate(results: Sequence[CaseResult]) -> float | None:
    graded = [r for r in results if r.status in ("passed", "failed")]
    return sum(r.status == "passed" for r in graded) / len(graded) if graded else None


def _outcomes(results: Sequence[CaseResult]) -> list[bool | None]:
    return [r.status == "passed" if r.status in ("passed", "failed") else None for r in results]


def _shown(result: CaseResult) -> dict[str, Any]:
    """One training answer as the reflection model reads it."""
    return {"Inputs": result.case.input, "Generated Outputs": result.output or "(no answer)",
            "Feedback": result.feedback()}


def optimize(agent: Any, cases: Any, *, evaluators: Sequence[Any], reflection_model: Any,
             api_base: str | None = None, api_key: str | None = None, max_metric_calls: int = 150,
             holdout: float = 0.3, seed: int = 0, max_cost_usd: float | None = None, max_calls: int | None = None,
             where: RecordFilter | None = None, concurrency: int = 4, minibatch_size: int = 3,
             run_dir: str | None = None, timeout: float = 120.0,
             progress: Callable[[int], None] | None = None) -> OptimizeResult:
    """Search for instructions that make `agent` (an agno Agent or Team) pass `evaluators` more often.

    `cases`: dicts with ``input`` (and ``expected_output``), a JSONL file ``judgehooks export`` wrote,
    or a judgehooks store, store URL or store file path (what `judgehooks --store` takes: a SQLite file, or
    any path given with `where`), whose records `where` picks (default: the failed ones), one
    case per distinct input. `reflection_model`: what a judge's ``model=`` takes (a litellm model string,
    with `api_base`/`api_key`, or an agno Model). `max_metric_calls` bounds the agent runs gepa makes
    on training cases; `max_calls` and `max_cost_usd` cap every model call of the whole optimization
    (agent, judges, reflection, held-out runs). When a cap is reached or the run is interrupted
    (Ctrl-C), the best candidate so far is returned; `stopped` always says why the search ended; `run_dir` keeps gepa's
    state there so the same call resumes. `progress(n)` is told each time n more cases ran.
    """
    check_agent(agent)
    if not evaluators:
        raise ValueError("optimize needs at least one evaluator to grade the answers (evaluators=[...])")
    check_settings(max_metric_calls=max_metric_calls, holdout=holdout, seed=seed, max_cost_usd=max_cost_usd,
                   max_calls=max_calls, concurrency=concurrency, minibatch_size=minibatch_size, timeout=timeout)
    spend = Spend(max_cost_usd=max_cost_usd, max_calls=max_calls)
    model = TextModel(reflection_model, api_base=api_base, api_key=api_key, timeout=timeout)
    train, held = split(load_cases(cases, where), holdout, seed)
    runner = Runner(agent, list(evaluators), spend, concurrency, progress)
    original = instructions_of(agent)
    reflector = Reflector(model, spend)
    search = Search(COMPONENT, original, train, Adapter(COMPONENT, runner.run, _shown), reflector,
                    spend, max_metric_calls, seed=seed, minibatch_size=minibatch_size, run_dir=run_dir)
    before: list[CaseResult] = []
    try:
        before = runtime.call(runner.run, held, original)
        stopped = spend.stop_reason() or search.run()
        best = search.best()
        after = before if best.text == original else (
            runtime.call(runner.run, held, best.text) if not spend.interrupted else [])
    except KeyboardInterrupt:  # during a held-out run: what is known so far
        spend.interrupted = True
        stopped, best, after = "interrupted", search.best(), []
    finally:
        runtime.call(model.aclose)
    data = [text for case in (*train, *held) for text in (case.input, case.expected, case.feedback)]
    result = _result(original, best, search, before, after, stopped, spend, len(train), len(held))
    result.echoed = echoed(result.instructions, original, [*data, *reflector.shown])
    return result


def _result(original: str, best: Candidate, search: Search, before: list[CaseResult], after: list[CaseResult],
            stopped: str, spend: Spend, train: int, held: int) -> OptimizeResult:
    measured = len(after) == held and all(r.status != "not_run" for r in after)
    score_before = _pass_rate(before) if before and all(r.status != "not_run" for r in before) else None
    score_after = _pass_rate(after) if measured else None
    best.holdout_score = score_after
    candidates = search.candidates()
    for candidate in candidates:
        if candidate.text == original:  # the original, as measured on the held-out cases before
            candidate.holdout_score = score_before
    if score_before is None or score_after is None:
        why = f"the held-out cases were not all run before the optimization stopped ({stopped})"
        conclusive, note, p = False, f"not measured: {why}", None
    else:
        n, fixed, broken, p = compare(_outcomes(before), _outcomes(after))
        conclusive, note = verdict(n, fixed, broken, p)
    if stopped == "reflection_failed":
        note = f"no candidate was found: {spend.last_reflection_error}; " + note
    elif best.text == original:
        note = "no candidate beat the original instructions on the training cases; " + note
    errors = sum(1 for r in (after or before) if r.status == "error")
    return OptimizeResult(
        instructions=best.text, original_instructions=original, score_before=score_before, score_after=score_after,
        conclusive=conclusive, note=note, p_value=p, train_size=train, holdout_size=held, holdout_errors=errors,
        candidates=candidates, history=search.tracker.history, stopped=stopped, spend=spend.summary(),
        reflection_error=spend.last_reflection_error, holdout_before=[r.data() for r in before],
        holdout_after=[r.data() for r in after])


async def aoptimize(agent: Any, cases: Any, **settings: Any) -> OptimizeResult:
    """`optimize` for async callers: the search runs on a worker thread, the event loop stays free."""
    return await anyio.to_thread.run_sync(functools.partial(optimize, agent, cases, **settings))


__all__ = ("Case", "OptimizeResult", "aoptimize", "optimize")
