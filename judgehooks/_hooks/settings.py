"""HookSettings: one evaluator's deployment settings (`Deployment`, where each is defined), validated.

A frozen value, checked once (each setting by its own check, then the rules between settings),
which builds the `Pipeline` and, for background grading, the `Dispatcher`. An evaluator's own
fields say what it grades (`judgehooks._evaluators`); these, how it is deployed, as pydantic_evals
keeps `OnlineEvaluator` settings apart from the evaluator.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from .._base.callbacks import wrap_callback
from .._base.record import EvalRecord
from .._grading.dispatcher import Dispatcher
from .._grading.journal import JournalLog
from .._grading.outbox import Outbox
from .._grading.pipeline import CALLBACKS, Callbacks, Graded, Pipeline
from .._grading.ratelimit import Pace
from .._grading.routing import Review
from .._grading.spend import LOCAL, SpendCap
from .._grading.spend_file import SQLiteLedger
from .._grading.step import Step
from .._grading.work import Overload
from ..stores import (
    AgnoDbStore,
    BaseStore,
    FanoutStore,
    JsonlStore,
    MemoryStore,
    SpillingStore,
    SQLiteStore,
    Store,
)
from ..stores._sqlite import outbox_path_for
from ..stores._url import ENV, check_default_store_url, default_store_at
from .deployment import SETTINGS, Deployment
from .gate import Gate
from .sampling import Sampler


@dataclass(kw_only=True)
class HookSettings(Deployment):
    """Where records go, who hears of them, and when and how runs are graded: validated once,
    then read-only (assigning raises `dataclasses.FrozenInstanceError`)."""

    #: the gate, configured from gate/fallback/repair (None: no gate)
    gate_config: Gate | None = field(init=False, default=None, repr=False, compare=False)
    #: the default store's URL ($JUDGEHOOKS_DB, else ./judgehooks.db), read and checked once, here, for
    #: every evaluator kind and path alike; None when `store=` is given, or `db=` without $JUDGEHOOKS_DB
    default_url: str | None = field(init=False, default=None, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_sealed"):
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}: HookSettings is read-only")
        object.__setattr__(self, name, value)

    def __post_init__(self) -> None:
        for name, definition in SETTINGS.items():  # each setting's own check, in order
            check = definition.metadata["check"]
            if check is not None:
                object.__setattr__(self, name, check(name, getattr(self, name)))
        # the rules between settings
        if self.store is None and (self.db is None or os.environ.get(ENV, "").strip()):
            # a $JUDGEHOOKS_DB no store answers to, or whose folder is missing, fails here, naming it:
            # an inline evaluator builds its store on first use, inside a hook whose errors agno swallows
            self.default_url = check_default_store_url()
        if self.broker is not None and not self.run_in_background:
            raise ValueError("broker= hands grading to `judgehooks worker` processes, which is background "
                             "grading: set run_in_background=True as well")
        self.gate_config = Gate.configure(gate=self.gate, fallback=self.fallback, repair=self.repair,
                                          run_in_background=self.run_in_background, on_error=self.gate_on_error,
                                          on_skip=self.gate_on_skip, latency_s=self.gate_latency_s,
                                          on_timeout=self.gate_on_timeout)
        self._sealed = True

    def __repr__(self) -> str:
        given = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(Deployment)
                 if getattr(self, f.name) is not f.default and getattr(self, f.name) != f.default]
        return f"HookSettings({', '.join(given)})"

    def replace(self, name: str, value: Any) -> HookSettings:
        """These settings with one changed, validated as at construction."""
        return dataclasses.replace(self, **{name: value})

    @property
    def the_store(self) -> Store | None:
        """`store`, after a URL given for it was opened."""
        assert not isinstance(self.store, str)  # replaced in __post_init__
        return self.store

    @classmethod
    def names(cls) -> frozenset[str]:
        """The keyword arguments every evaluator accepts for its deployment."""
        return frozenset(f.name for f in dataclasses.fields(cls) if f.init)

    @property
    def judges_here(self) -> bool:
        """Whether this process runs the judge for background jobs (not with a broker: workers do),
        so LLM evaluators start a judge helper process only when it will be used."""
        return self.run_in_background and self.broker is None

    @property
    def builds_at_once(self) -> bool:
        """Whether the store, pipeline and dispatcher are built when the evaluator is constructed
        rather than on first use: a background dispatcher resumes the jobs a dead process left, and
        a spill re-delivers the records one left, both as soon as the application starts."""
        default_is_local = self.store is None and self.db is None and self.spill is None
        return self.run_in_background or (not default_is_local and self._spills(self.the_store))

    def sampler(self) -> Sampler:
        return Sampler(self.sample_rate, self.when)

    def build(self, evaluator: Graded, *, sampler: Sampler, spec: Mapping[str, Any] | None) -> Wiring:
        """The store, pipeline and (for background grading) the started dispatcher of one evaluator."""
        agno = None if self.db is None else AgnoDbStore(self.db, name=getattr(evaluator, "name", None))
        store = self._store(agno)
        spill = self._spill_path(store)

        def sink(with_agno: bool) -> Store:
            if store is agno:  # db= alone: an offline batch's cases are its one eval run, written beside
                found: Store = agno if with_agno else _BatchOnly()
            else:
                found = FanoutStore(store, agno) if with_agno and agno is not None else store
            return found if spill is None else SpillingStore(found, spill)

        pipeline = Pipeline(evaluator=evaluator, store=sink(True), callbacks=self.callbacks())
        judge = pipeline.judge
        spend = None
        if self.max_cost_usd is not None or self.max_calls is not None:
            spend = SpendCap(evaluator=pipeline.name, model=judge.model if judge is not None else "-", per=self.per,
                             max_cost_usd=self.max_cost_usd, max_calls=self.max_calls, budget=self.budget,
                             ledger=LOCAL if self.spend_ledger is None else SQLiteLedger(self.spend_ledger))
        pace = Pace.local(judge.model if judge is not None else pipeline.name, self.requests_per_minute)
        pipeline = dataclasses.replace(pipeline, spend=spend, pace=pace)
        # An offline batch is one agno eval run holding every case (as agno writes it), not one per case;
        # only live grading routes verdicts in doubt to people.
        offline = dataclasses.replace(pipeline, store=pipeline.store if agno is None else sink(False))
        if getattr(evaluator, "routes_to_review", True):
            pipeline = dataclasses.replace(pipeline, review=Review(self.review_margin, self.review_sample_rate))
        dispatcher = self.dispatcher(pipeline, store, sampler=sampler, spec=spec) if self.run_in_background else None
        return Wiring(store=store, pipeline=pipeline, dispatcher=dispatcher, offline=offline, agno=agno)

    def dispatcher(self, pipeline: Pipeline, store: Store, *, sampler: Sampler,
                   spec: Mapping[str, Any] | None) -> Dispatcher:
        """The started background dispatcher of `pipeline` (`run_in_background=True`)."""
        step: Step | None = None
        options: dict[str, Any] = {}
        if self.broker is not None:  # publish jobs to Redis; `judgehooks worker` processes grade them
            from .._grading.redis.publish import Publisher

            publisher = Publisher(self.broker, pipeline.evaluator, max_connections=self.max_concurrency + 2)
            step, options = publisher.step, {"batch_size": 256, "flush_interval": 0.1,
                                             "describe": publisher.describe, "judges_here": False}
        dispatcher = Dispatcher(
            pipeline, step=step, outbox=self._outbox(store), max_queue=self.max_queue,
            # overload was checked against OVERLOAD_POLICIES at construction
            max_concurrency=self.max_concurrency, overload=cast(Overload, self.overload),
            block_timeout=self.block_timeout, max_queue_bytes=self.max_queue_bytes,
            spec=None if spec is None else dict(spec),
            sampling=sampler.counts, **options)
        dispatcher.start()  # also resumes this evaluator's jobs left by a dead process
        return dispatcher

    def _store(self, agno: AgnoDbStore | None) -> Store:
        """Where records go besides the agno db: `store=`; else, with `db=`, nowhere (agno's db is
        the only store and no file of ours appears), unless $JUDGEHOOKS_DB names a store; else the
        default store (as `default_url` was at construction)."""
        given = self.the_store
        if given is not None:
            return given
        if self.default_url is None:
            assert agno is not None  # default_url is None only with store= or db= (__post_init__)
            return agno
        found: Store = default_store_at(self.default_url)
        return found

    def callbacks(self) -> Callbacks:
        """These settings' callbacks, wrapped once: the holder every copy of the pipeline shares."""
        return Callbacks(**{name: wrap_callback(name, getattr(self, name)) for name in CALLBACKS})

    def _outbox(self, store: Store) -> JournalLog | None:
        """The outbox file: explicit path; False for none; else `outbox_path_for(store)` (beside a
        SQLite store, $JUDGEHOOKS_OUTBOX, else the store's own file in the per-user state folder)."""
        if self.outbox is False:
            return None
        path = self.outbox if isinstance(self.outbox, (str, os.PathLike)) else outbox_path_for(store)
        return JournalLog(Outbox(path))  # puts appended to a journal file, folded into the outbox file

    def _spills(self, store: Store | None) -> bool:
        """Whether records wait on disk while the store is down: by default only for stores that can
        go away (not a local file or memory); `spill=` decides otherwise."""
        local = self.db is None and isinstance(store, (SQLiteStore, MemoryStore, JsonlStore))
        return not (self.spill is False or (self.spill is None and local))

    def _spill_path(self, store: Store) -> str | os.PathLike[str] | None:
        """Where records wait while the store is down: an explicit path; False for nowhere; else the
        outbox file (see `_spills`)."""
        if not self._spills(store):
            return None
        if isinstance(self.spill, (str, os.PathLike)):
            return self.spill
        if isinstance(self.outbox, (str, os.PathLike)):
            return self.outbox
        return outbox_path_for(store)


class _BatchOnly(BaseStore):
    """With `db=` alone, an offline batch's cases: the batch is one agno eval run holding them all
    (as agno writes it), written beside this store, so each case is written nowhere else."""

    async def write(self, records: Sequence[EvalRecord]) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Wiring:
    """What HookSettings built for one evaluator."""

    store: Store
    pipeline: Pipeline
    dispatcher: Dispatcher | None
    offline: Pipeline  # run()/arun(): the pipeline without the agno db, which gets one eval run per batch
    agno: AgnoDbStore | None = None
