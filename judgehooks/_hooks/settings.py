"""HookSettings: how an evaluator is deployed, apart from what it grades.

Every evaluator takes the same deployment settings (store, callbacks, background grading,
sampling, gates). They live here, in one frozen value validated once, which builds the
`Pipeline` and, for background grading, the `Dispatcher`. An evaluator declares only its own
fields (`judgehooks._evaluators`), as pydantic_evals keeps `OnlineEvaluator` settings apart from
the evaluator.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from .._base.callbacks import wrap_callback
from .._base.context import EvalContext
from .._base.record import EvalRecord
from .._base.sqlitefile import checked_path
from .._base.urls import redact
from .._base.validate import check_choice, check_number
from .._grading.budget import DEFAULT_MAX_QUEUE_BYTES
from .._grading.dispatcher import Dispatcher
from .._grading.outbox import Outbox
from .._grading.pipeline import CALLBACKS, Callbacks, Graded, Pipeline
from .._grading.ratelimit import Pace
from .._grading.redis import check_url, require_extra
from .._grading.spend import LOCAL, PERIODS, SpendCap
from .._grading.spend_file import SQLiteLedger
from .._grading.step import Step
from .._grading.work import OVERLOAD_POLICIES, Overload
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
from ..stores._url import ENV, check_default_store_url, default_store_at, store_from_url
from .gate import DEFAULT_FALLBACK, Gate
from .sampling import Sampler, SampleRate

Callback = Callable[[EvalRecord], Any]
PathSetting = str | os.PathLike[str] | bool | None


def setting(default: Any) -> Any:
    """One deployment setting's field: its default (not in a repr: an evaluator's repr shows its own
    fields, and a store's repr may hold a URL)."""
    return field(default=default, repr=False)


@dataclass(kw_only=True)
class Deployment:
    """The deployment keywords every evaluator takes, declared once. Every evaluator inherits them
    as keyword-only fields (so its constructor, `inspect.signature` and type checkers take them
    natively), and keeps them in its `HookSettings`: these, validated."""

    store: Store | str | None = setting(None)  # a string is a store URL or path: judgehooks.stores.store_from_url
    db: Any = setting(None)  # an agno db: records also go to its eval table (AgentOS shows them)
    on_fail: Callback | None = setting(None)
    on_error: Callback | None = setting(None)
    on_record: Callback | None = setting(None)
    on_drop: Callback | None = setting(None)
    run_in_background: bool = setting(False)
    sample_rate: SampleRate = setting(1.0)
    when: Callable[[EvalContext], bool] | None = setting(None)
    max_concurrency: int = setting(32)
    max_queue: int = setting(10_000)
    max_queue_bytes: int = setting(DEFAULT_MAX_QUEUE_BYTES)  # bytes of queued jobs; beyond: shed, a `skipped` record
    overload: str = setting("drop_newest")  # a full queue sheds at once: a hanging judge never stalls the runs
    block_timeout: float = setting(5.0)
    outbox: PathSetting = setting(None)
    spill: PathSetting = setting(None)
    requests_per_minute: float | None = setting(None)
    broker: str | None = setting(None)
    gate: bool = setting(False)
    fallback: str = setting(DEFAULT_FALLBACK)
    repair: int = setting(0)
    # a gate with no verdict (judge error): "block" shows the fallback, "allow" the answer
    gate_on_error: str = setting("block")
    gate_on_skip: str = setting("block")  # a gate over a spend cap or with a shed job (`skipped`): as gate_on_error
    print_summary: bool = setting(False)
    print_results: bool = setting(False)
    file_path_to_save_results: str | None = setting(None)
    # text -> text before anything leaves the process: judgehooks.redact
    redact: Callable[[str], str] | None = setting(None)
    # judge spend per window `per`; over it: a `skipped` record, reason "budget"
    max_cost_usd: float | None = setting(None)
    max_calls: int | None = setting(None)  # judge calls per window `per`
    per: str = setting("hour")  # the cap's window: "minute", "hour" or "day" (fixed, in UTC)
    budget: str | None = setting(None)  # a name: evaluators naming the same budget share its counts (per judge model)
    # a SQLite file of the caps' counts, shared across processes
    spend_ledger: str | os.PathLike[str] | None = setting(None)


class OwnKeywords(TypedDict, total=False):
    """The deployment keywords beyond agno's own, for a hand-written ``__init__`` (PEP 692,
    ``**hook: Unpack[OwnKeywords]``): `Deployment`'s names and types (a test holds them equal)."""

    store: Store | str | None
    on_error: Callback | None
    on_record: Callback | None
    on_drop: Callback | None
    sample_rate: SampleRate
    when: Callable[[EvalContext], bool] | None
    max_concurrency: int
    max_queue: int
    max_queue_bytes: int
    overload: str
    block_timeout: float
    outbox: PathSetting
    spill: PathSetting
    requests_per_minute: float | None
    broker: str | None
    gate: bool
    fallback: str
    repair: int
    gate_on_error: str
    gate_on_skip: str
    redact: Callable[[str], str] | None
    max_cost_usd: float | None
    max_calls: int | None
    per: str
    budget: str | None
    spend_ledger: str | os.PathLike[str] | None


class DeploymentKeywords(OwnKeywords, total=False):
    """Every deployment keyword: `OwnKeywords` and those agno's `AgentAsJudgeEval` names in its own
    signature (a hand-written ``__init__(self, ..., **hook: Unpack[DeploymentKeywords])``)."""

    db: Any
    on_fail: Callback | None
    run_in_background: bool
    print_summary: bool
    print_results: bool
    file_path_to_save_results: str | None



#: Settings an assignment changes from the next run on, whatever was built: they are read per run.
LIVE_SETTINGS = frozenset({*CALLBACKS, "sample_rate", "when", "gate", "fallback", "repair",
                           "gate_on_error", "gate_on_skip", "print_summary", "print_results",
                           "file_path_to_save_results", "redact"})
#: Settings only a background dispatcher reads: they change until one runs. The others (store, db,
#: spill, outbox, broker, run_in_background) decide what is built, and change until it is.
DISPATCH_SETTINGS = frozenset({"max_queue", "overload", "block_timeout", "max_concurrency"})


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
        if isinstance(self.store, str):
            self.store = _store_named(self.store)
        if self.store is not None and not (hasattr(self.store, "write") and hasattr(self.store, "query")):
            raise TypeError(f"store must implement judgehooks.stores.Store (write, query), "
                            f"got {type(self.store).__name__}")
        if self.store is None and (self.db is None or os.environ.get(ENV, "").strip()):
            # a $JUDGEHOOKS_DB no store answers to, or whose folder is missing, fails here, naming it:
            # an inline evaluator builds its store on first use, inside a hook whose errors agno swallows
            self.default_url = check_default_store_url()
        if self.db is not None:
            AgnoDbStore(self.db)  # refuses, by name, a db that cannot hold agno eval runs
        Sampler.validate(self.sample_rate, self.when)
        check_number("max_concurrency", self.max_concurrency, minimum=1, allow_equal=True, integer=True)
        check_number("max_queue", self.max_queue, minimum=1, allow_equal=True, integer=True)
        check_number("max_queue_bytes", self.max_queue_bytes, minimum=1, allow_equal=True, integer=True)
        check_number("block_timeout", self.block_timeout, minimum=0, allow_equal=True)
        check_choice("overload", self.overload, OVERLOAD_POLICIES)
        if self.requests_per_minute is not None:
            check_number("requests_per_minute", self.requests_per_minute, minimum=0, allow_equal=False)
        if self.outbox is not None and not isinstance(self.outbox, (bool, str, os.PathLike)):
            raise TypeError(f"outbox must be a path, True/None (next to the store) or False (no outbox), "
                            f"got {type(self.outbox).__name__}")
        if self.spill is not None and not isinstance(self.spill, (bool, str, os.PathLike)):
            raise TypeError(f"spill must be a path, True (in the outbox file), False (off) or None (on for "
                            f"stores that are not local files), got {type(self.spill).__name__}")
        if self.broker is not None:
            check_url(self.broker, "broker")
            if not self.run_in_background:
                raise ValueError("broker= hands grading to `judgehooks worker` processes, which is background "
                                 "grading: set run_in_background=True as well")
            require_extra("broker")
        if self.max_cost_usd is not None:
            check_number("max_cost_usd", self.max_cost_usd, minimum=0, allow_equal=False)
        if self.max_calls is not None:
            check_number("max_calls", self.max_calls, minimum=1, allow_equal=True, integer=True)
        check_choice("per", self.per, tuple(PERIODS))
        if self.budget is not None and (not isinstance(self.budget, str) or not self.budget.strip()):
            raise ValueError(f"budget must be a non-empty name shared by the evaluators that spend it, "
                             f"got {self.budget!r}")
        if self.spend_ledger is not None and (not isinstance(self.spend_ledger, (str, os.PathLike))
                                              or not os.fspath(self.spend_ledger)):
            raise TypeError(f"spend_ledger must be the path of a SQLite file that the processes sharing the caps "
                            f"name, got {self.spend_ledger!r}")
        if self.spend_ledger is not None:  # else every call would be admitted uncounted: the caps off
            checked_path(self.spend_ledger, "spend_ledger")
        if self.redact is not None and not callable(self.redact):
            raise TypeError(f"redact must be a function from text to text (e.g. judgehooks.redact.PII), "
                            f"got {type(self.redact).__name__}")
        for name in ("on_fail", "on_error", "on_record", "on_drop"):
            wrap_callback(name, getattr(self, name))  # validates: a callback that is not callable fails here
        gate = Gate.configure(gate=self.gate, fallback=self.fallback, repair=self.repair,
                              run_in_background=self.run_in_background, on_error=self.gate_on_error,
                              on_skip=self.gate_on_skip)
        self.gate_config = gate
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
        # An offline batch is one agno eval run holding every case (as agno writes it), not one per case.
        offline = pipeline if agno is None else dataclasses.replace(pipeline, store=sink(False))
        dispatcher = self.dispatcher(pipeline, store, sampler=sampler, spec=spec) if self.run_in_background else None
        return Wiring(store=store, pipeline=pipeline, dispatcher=dispatcher, offline=offline, agno=agno)

    def dispatcher(self, pipeline: Pipeline, store: Store, *, sampler: Sampler,
                   spec: Mapping[str, Any] | None) -> Dispatcher:
        """The started background dispatcher of `pipeline` (`run_in_background=True`)."""
        step: Step | None = None
        options: dict[str, Any] = {}
        if self.broker is not None:  # publish jobs to Redis; `judgehooks worker` processes grade them
            from .._grading.redis.publish import Publisher

            publisher = Publisher(self.broker, max_connections=self.max_concurrency + 2)
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

    def _outbox(self, store: Store) -> Outbox | None:
        """The outbox file: explicit path; False for none; else `outbox_path_for(store)` (beside a
        SQLite store, $JUDGEHOOKS_OUTBOX, else the store's own file in the per-user state folder)."""
        if self.outbox is False:
            return None
        return Outbox(self.outbox if isinstance(self.outbox, (str, os.PathLike)) else outbox_path_for(store))

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


def _store_named(url: str) -> Store:
    """store="postgresql://...", "sqlite:///evals.db" or a path, read by `store_from_url`."""
    try:
        store: Store = store_from_url(url)
    except (ValueError, ImportError) as exc:
        raise type(exc)(f"store={redact(url)!r}: {exc} (a store given as a string is read by "
                        "judgehooks.stores.store_from_url)") from exc
    return store
