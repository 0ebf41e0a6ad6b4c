"""The seam to gepa (imported on first use: the `judgehooks[optimize]` extra): an adapter that runs
and grades candidates through judgehooks, the reflection model as gepa calls it (`reflect.Reflector`),
and the record of every candidate gepa scored, kept here so an interrupted run still reports the
best one so far.

gepa sees the training cases only: held-out cases are run by the caller, before and after, never
through gepa, so neither gepa's selection nor the reflection model's prompts can see them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._base.log import log
from .._runtime import runtime
from .reflect import Reflector
from .spend import Spend


class Graded(Protocol):
    @property
    def score(self) -> float: ...

    def feedback(self) -> str: ...

    def data(self) -> dict[str, Any]: ...


def load_gepa() -> Any:
    try:
        import gepa
    except ImportError as exc:
        raise ImportError("optimize and align_judge need gepa: pip install 'judgehooks[optimize]'") from exc
    return gepa


@dataclass
class Candidate:
    """One text gepa scored on the training cases."""

    index: int
    text: str
    train_score: float
    parents: tuple[int, ...] = ()
    iteration: int = 0
    holdout_score: float | None = None


@dataclass
class Tracker:
    """gepa's callbacks: every candidate scored and what happened, as it happens."""

    candidates: dict[int, Candidate] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    def on_valset_evaluated(self, event: Mapping[str, Any]) -> None:
        index = int(event["candidate_idx"])
        self.candidates[index] = Candidate(index, event["candidate"][next(iter(event["candidate"]))],
                                           float(event["average_score"]),
                                           tuple(p for p in event.get("parent_ids") or () if p is not None),
                                           int(event["iteration"]))
        self.history.append({"event": "scored", "iteration": int(event["iteration"]), "candidate": index,
                             "train_score": float(event["average_score"])})

    def on_candidate_accepted(self, event: Mapping[str, Any]) -> None:
        self.history.append({"event": "accepted", "iteration": int(event["iteration"]),
                             "candidate": int(event["new_candidate_idx"]), "minibatch_score": event["new_score"]})

    def on_candidate_rejected(self, event: Mapping[str, Any]) -> None:
        self.history.append({"event": "rejected", "iteration": int(event["iteration"]),
                             "minibatch_score_before": event["old_score"], "minibatch_score_after": event["new_score"],
                             "reason": str(event["reason"])})

    def best(self) -> Candidate | None:
        """The highest training score; the earliest of equals (the seed wins a tie)."""
        return max(sorted(self.candidates.values(), key=lambda c: c.index), key=lambda c: c.train_score,
                   default=None)


def runs_per_try(train: int, minibatch_size: int) -> int:
    """The most runs one gepa iteration makes: a minibatch with the parent text and with the child, then
    every training case with the child when it is kept (the training cases are gepa's validation set)."""
    return 2 * min(minibatch_size, train) + train


def check_budget(max_metric_calls: int, train: int, minibatch_size: int) -> None:
    """Refuse a budget that cannot try one candidate: the runs would buy nothing but the original's score."""
    least = train + runs_per_try(train, minibatch_size)
    if max_metric_calls < least:
        raise ValueError(
            f"max_metric_calls={max_metric_calls} cannot try one candidate: scoring the original on the {train} "
            f"training cases takes {train} runs, and a try up to {runs_per_try(train, minibatch_size)} more (a "
            f"minibatch of {min(minibatch_size, train)}, with the old and the new text, then the {train} training "
            f"cases when the new text is kept); give at least {least}")


class BudgetSpent(RuntimeError):
    """A batch would take the training runs past `max_metric_calls` (never run)."""


class Adapter:
    """gepa's `GEPAAdapter`: one text component, run and graded by `run(cases, text)`. It counts the
    training runs it makes (`runs`) and never makes more than `limit`."""

    propose_new_texts = None  # gepa's reflective proposal, with `Reflector` as its reflection strategy

    def __init__(self, component: str, run: Callable[[list[Any], str], Awaitable[Sequence[Graded]]],
                 describe: Callable[[Any], dict[str, Any]]) -> None:
        self.component, self._run, self._describe = component, run, describe
        self.runs = 0
        self.limit: int | None = None  # set by `Search`: its max_metric_calls

    def evaluate(self, batch: list[Any], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        gepa = load_gepa()
        if self.limit is not None and self.runs + len(batch) > self.limit:
            raise BudgetSpent(f"{len(batch)} more runs would pass max_metric_calls={self.limit} ({self.runs} made)")
        self.runs += len(batch)
        results = list(runtime.call(self._run, list(batch), candidate[self.component]))
        return gepa.EvaluationBatch(outputs=[r.data() for r in results], scores=[r.score for r in results],
                                    trajectories=results if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        shown = [self._describe(r) for r in eval_batch.trajectories or ()]
        return {name: shown for name in components_to_update}


class _Log:
    """gepa's logger: its lines go to judgehooks' log at debug level (a library never prints)."""

    def log(self, message: str) -> None:
        log.debug("gepa", message=str(message)[:2000])


@dataclass
class Search:
    """One gepa run over the training cases."""

    component: str
    seed_text: str
    train: list[Any]
    adapter: Adapter
    reflector: Reflector
    spend: Spend
    max_metric_calls: int
    seed: int = 0
    minibatch_size: int = 3
    run_dir: str | None = None
    tracker: Tracker = field(default_factory=Tracker)

    def __post_init__(self) -> None:
        check_budget(self.max_metric_calls, len(self.train), self.minibatch_size)
        self.adapter.limit = self.max_metric_calls

    def run(self) -> str:
        """Search; return why it stopped (see `reason`)."""
        gepa = load_gepa()
        try:
            result = gepa.optimize(seed_candidate={self.component: self.seed_text}, trainset=self.train, valset=None,
                          adapter=self.adapter, reflection_strategy=self.reflector,
                          max_metric_calls=self.max_metric_calls,
                          stop_callbacks=[self.spend, self._perfect, self._spent], logger=_Log(),
                          callbacks=[self.tracker],
                          seed=self.seed, run_dir=self.run_dir, track_best_outputs=False, raise_on_exception=False,
                          reflection_minibatch_size=min(self.minibatch_size, len(self.train)),
                          display_progress_bar=False)
        except KeyboardInterrupt:
            self.spend.interrupted = True
            return self.reason()
        for i, (found, score) in enumerate(zip(result.candidates, result.val_aggregate_scores, strict=False)):
            if i not in self.tracker.candidates:  # scored before a resume (gepa's run_dir): not seen here
                parents = tuple(p for p in result.parents[i] if p is not None)
                self.tracker.candidates[i] = Candidate(i, found[self.component], float(score), parents)
        return self.reason()

    def reason(self) -> str:
        """Why the search stopped: ``interrupted``; ``reflection_failed`` (a reflection call failed and no
        text but the original was scored, or three failed in a row); ``max_calls`` or ``max_cost_usd`` (a
        spend cap); ``perfect`` (a candidate passed every training case); else ``budget``
        (`max_metric_calls` had no room for another try)."""
        why = self.spend.stop_reason()
        if why == "interrupted":
            return why
        if self.spend.reflection_failures and all(c.text == self.seed_text for c in self.candidates()):
            return "reflection_failed"
        return why or ("perfect" if self._perfect() else "budget")

    def _spent(self, state: Any = None) -> bool:
        """The next iteration might not fit in `max_metric_calls`: stop before it, rather than pay a
        minibatch and a reflection call for a candidate that could not be scored on every training case."""
        return self.adapter.runs + runs_per_try(len(self.train), self.minibatch_size) > self.max_metric_calls

    def _perfect(self, state: Any = None) -> bool:
        """A candidate passed every training case: nothing is left for gepa to learn from."""
        best = self.tracker.best()
        return best is not None and best.train_score >= 1.0

    def best(self) -> Candidate:
        return self.tracker.best() or Candidate(0, self.seed_text, 0.0)

    def candidates(self) -> list[Candidate]:
        return [self.tracker.candidates[i] for i in sorted(self.tracker.candidates)]
