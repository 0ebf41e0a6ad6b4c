"""Evaluator: the base every judgehooks evaluator shares. Override ONE method, `evaluate(ctx)`.

Everything else comes from here, the same for an LLM judge, a regex or a composite: agno's hook
shells (`post_check` / `async_post_check`), sampling, inline or background grading, quality gates
and repair (`_gate`), the record in the store, `on_fail` / `on_error` / `on_record`, offline
`run()` / `arun()` batches and `stats()`.

    class MaxWords(Evaluator):
        def __init__(self, limit: int, **hook):
            self.limit = limit                     # settings first, then the shared hook settings
            super().__init__(**hook)

        def evaluate(self, ctx):                   # sync runs on a worker thread; async is awaited
            return len(ctx.output.split()) <= self.limit
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import anyio.to_thread
from agno.eval.base import BaseEval

from .._base.callbacks import wrap_callback
from .._base.context import EvalContext
from .._base.outcome import Outcome, to_outcome
from .._base.record import EvalRecord, Mode
from .._base.result import AgentAsJudgeResult
from .._base.validate import check_choice, check_name, check_number
from .._grading.dispatcher import OVERLOAD_POLICIES, Dispatcher
from .._grading.outbox import Outbox
from .._grading.pipeline import Pipeline
from .._grading.redis import check_url, require_extra
from .._hooks import offline
from .._hooks.gate import DEFAULT_FALLBACK, Gate
from .._hooks.hooklist import ensure_dual_hooks
from .._hooks.sampling import Sampler, SampleRate
from .._hooks.snapshot import snapshot_run
from .._runtime import runtime
from ..exceptions import StoreError
from ..stores import JsonlStore, MemoryStore, SQLiteStore, Store, default_store
from ..stores._agno import AgnoDbStore
from ..stores._fanout import FanoutStore
from ..stores._spill import SpillingStore
from ..stores._sqlite import outbox_path_for
from . import spec as _spec


def _outbox_for(outbox: Any, store: Store) -> Outbox | None:
    """The outbox file: explicit path; False for none; else beside a SQLite store, or from
    $JUDGEHOOKS_OUTBOX, else ./judgehooks.outbox.db."""
    if outbox is False:
        return None
    return Outbox(outbox if isinstance(outbox, (str, os.PathLike)) else outbox_path_for(store))


def _spill_for(spill: Any, outbox: Any, store: Store, *, local: bool) -> str | os.PathLike[str] | None:
    """Where records wait while the store is down: an explicit path; False for nowhere; else the
    outbox file, by default only for stores that can go away (not a local file or memory)."""
    if spill is False or (spill is None and local and isinstance(store, (SQLiteStore, MemoryStore, JsonlStore))):
        return None
    if isinstance(spill, (str, os.PathLike)):
        return spill
    return outbox if isinstance(outbox, (str, os.PathLike)) else outbox_path_for(store)


def _check_broker(broker: Any, run_in_background: bool) -> None:
    """broker= must be a Redis URL, with background grading, and the `redis` extra installed."""
    check_url(broker, "broker")
    if not run_in_background:
        raise ValueError("broker= hands grading to `judgehooks worker` processes, which is background grading: "
                         "set run_in_background=True as well")
    require_extra("broker")


def judges_in_background(run_in_background: Any, broker: Any) -> bool:
    """Whether this process runs the judge for background jobs (not with a broker: workers do), so
    LLM evaluators start a judge helper process only when it will be used."""
    return bool(run_in_background) and broker is None


def stable_name(kind: str, settings: Any) -> str:
    """A default evaluator name that is the same in every process for the same settings."""
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True, default=repr).encode()).hexdigest()[:10]
    return f"{kind}-{digest}"


class Evaluator(BaseEval):
    """Base of every judgehooks evaluator; put instances in an agno Agent's or Team's ``post_hooks``.

    Subclasses override ``evaluate(ctx)`` returning a bool, a number (held to ``threshold``), a
    dict with passed/score/reason/details, or an `Outcome`. An exception raised there, or a return
    value that is none of these, becomes an ``error`` record, never a failure.
    """

    mode: Mode = "binary"
    #: the full mark of this evaluator's scores; composites divide by it to mix evaluators
    scale: ClassVar[float] = 1.0
    #: whether evaluate() reads ctx.tool_calls (the snapshot skips them otherwise); checks that
    #: only read the text turn it off to keep the hook path short
    needs_tools: bool = True
    #: settings that rebuild this evaluator in another process (`judgehooks resume`), or None
    _rebuild: dict[str, Any] | None = None

    def __init__(
        self,
        *,
        name: str | None = None,
        threshold: float | None = None,
        on_fail: Callable[[EvalRecord], Any] | None = None,
        on_error: Callable[[EvalRecord], Any] | None = None,
        store: Store | None = None,
        db: Any = None,
        run_in_background: bool = False,
        sample_rate: SampleRate = 1.0,
        when: Callable[[EvalContext], bool] | None = None,
        max_concurrency: int = 32,
        max_queue: int = 10_000,
        overload: str = "block",
        block_timeout: float = 5.0,
        on_drop: Callable[[EvalRecord], Any] | None = None,
        outbox: str | os.PathLike[str] | bool | None = None,
        requests_per_minute: float | None = None,
        print_summary: bool = False,
        print_results: bool = False,
        file_path_to_save_results: str | None = None,
        gate: bool = False,
        fallback: str = DEFAULT_FALLBACK,
        repair: int = 0,
        on_record: Callable[[EvalRecord], Any] | None = None,
        spill: str | os.PathLike[str] | bool | None = None,
        broker: str | None = None,
    ) -> None:
        check_name(name)
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
                raise TypeError(f"threshold must be a number or None, got {threshold!r}")
            self.mode = "numeric"
        if store is not None and not (hasattr(store, "write") and hasattr(store, "query")):
            raise TypeError(f"store must implement judgehooks.stores.Store (write, query), got {type(store).__name__}")
        Sampler.validate(sample_rate, when)
        check_number("max_concurrency", max_concurrency, minimum=1, allow_equal=True, integer=True)
        check_number("max_queue", max_queue, minimum=1, allow_equal=True, integer=True)
        check_number("block_timeout", block_timeout, minimum=0, allow_equal=True)
        check_choice("overload", overload, OVERLOAD_POLICIES)
        if requests_per_minute is not None:
            check_number("requests_per_minute", requests_per_minute, minimum=0, allow_equal=False)
        if outbox is not None and not isinstance(outbox, (bool, str, os.PathLike)):
            raise TypeError(f"outbox must be a path, True/None (next to the store) or False (no outbox), "
                            f"got {type(outbox).__name__}")
        if spill is not None and not isinstance(spill, (bool, str, os.PathLike)):
            raise TypeError(f"spill must be a path, True (in the outbox file), False (off) or None (on for "
                            f"stores that are not local files), got {type(spill).__name__}")
        if broker is not None:
            _check_broker(broker, run_in_background)
        self._gate = Gate.configure(gate=gate, fallback=fallback, repair=repair, run_in_background=run_in_background)
        self.name = name
        self.threshold = threshold
        self.pass_threshold = threshold  # what scores are held to, and the record's threshold
        self.evaluator: str = name or self.default_name()
        self.on_fail = on_fail
        self.on_error = on_error
        self.db = db
        self.run_in_background = run_in_background
        self.sample_rate = sample_rate
        self.when = when
        self.max_concurrency = max_concurrency
        self.max_queue = max_queue
        self.overload = overload
        self.on_drop = on_drop
        self.print_summary = print_summary
        self.print_results = print_results
        self.file_path_to_save_results = file_path_to_save_results
        self._is_async = inspect.iscoroutinefunction(self.evaluate)
        self._sampler = Sampler(sample_rate, when)
        self.store: Store = store if store is not None else default_store()
        sink: Store = self.store
        if db is not None:
            sink = FanoutStore(self.store, AgnoDbStore(db))
        spill_path = _spill_for(spill, outbox, self.store, local=db is None)
        if spill_path is not None:
            sink = SpillingStore(sink, spill_path)
        self._pipeline = Pipeline(evaluator=self, store=sink, on_fail=wrap_callback("on_fail", on_fail),
                                  on_error=wrap_callback("on_error", on_error),
                                  on_record=wrap_callback("on_record", on_record))
        self._dispatcher: Dispatcher | None = None
        if run_in_background:
            dispatcher_class: type[Dispatcher] = Dispatcher
            extra: dict[str, Any] = {}
            if broker is not None:  # publish jobs to Redis; `judgehooks worker` processes grade them
                from .._grading.redis.publish import Forwarder

                dispatcher_class, extra = Forwarder, {"broker_url": broker}
            self._dispatcher = dispatcher_class(
                self._pipeline, outbox=_outbox_for(outbox, self.store), max_queue=max_queue,
                max_concurrency=max_concurrency, overload=overload, block_timeout=block_timeout,  # type: ignore[arg-type]
                on_drop=wrap_callback("on_drop", on_drop), requests_per_minute=requests_per_minute,
                spec=self.spec(), sampling=self._sampler.counts, **extra)
            self._dispatcher.start()  # also resumes this evaluator's jobs left by a dead process

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass __init__ that forgets ``super().__init__(**hook)`` fails at construction with
        a message, not later inside agno's hook runner (which would log and swallow the error)."""
        super().__init_subclass__(**kwargs)
        _spec.register(cls)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def checked(self: Evaluator, *args: Any, **kw: Any) -> None:
            init(self, *args, **kw)
            if type(self).__init__ is checked and "_pipeline" not in self.__dict__:
                raise TypeError(f"{cls.__name__}.__init__ must call super().__init__(**hook) after setting its "
                                "own settings (it sets up the store, callbacks and background grading)")

        cls.__init__ = checked  # type: ignore[method-assign]

    # ---- what a subclass provides ---------------------------------------------------------------

    async def evaluate(self, ctx: EvalContext) -> Any:
        """Judge one run from its snapshot. Override this (sync or async)."""
        raise NotImplementedError(f"{type(self).__name__} must override evaluate(ctx)")

    def default_name(self) -> str:
        """The record's evaluator name when none is given: stable across processes."""
        kind = type(self).__name__.lower()
        return stable_name(kind, self._rebuild) if self._rebuild is not None else kind

    def record_metadata(self) -> Mapping[str, Any]:
        """Extra metadata this evaluator adds to each record (e.g. the judge's criteria)."""
        return {}

    def spec(self) -> dict[str, Any] | None:
        """What `judgehooks resume` needs to rebuild this evaluator in another process, or None
        when it is built from user code (functions, models, child evaluators): then resume needs
        ``--import`` with the module that constructs it."""
        if self._rebuild is None or not type(self).__module__.startswith("judgehooks."):
            return None
        return {"class": type(self).__name__,
                "settings": {**self._rebuild, "name": self.evaluator, "threshold": self.pass_threshold}}

    # ---- the one way the core runs an evaluator ---------------------------------------------------

    async def assess(self, ctx: EvalContext) -> Outcome:
        """Run `evaluate` and read its result. Never raises: failures are error outcomes."""
        try:
            if self._is_async:
                value = await self.evaluate(ctx)
            else:
                value = await anyio.to_thread.run_sync(self.evaluate, ctx)
            return to_outcome(value, evaluator=self.evaluator, threshold=self.pass_threshold)
        except Exception as exc:
            return Outcome(error=exc)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.evaluator!r})"

    # An evaluator is immutable configuration plus shared resources: agno's deep copies share it.
    def __copy__(self) -> Evaluator:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Evaluator:
        return self

    # ---- agno hook shells -------------------------------------------------------------------

    def pre_check(self, run_input: Any) -> None:
        raise ValueError(f"judgehooks.{type(self).__name__} grades finished runs: put it in post_hooks, "
                         "not pre_hooks")

    async def async_pre_check(self, run_input: Any) -> None:
        self.pre_check(run_input)

    def _context(self, run_output: Any, agent: Any, team: Any, user_id: str | None,
                 metadata: Mapping[str, Any] | None) -> EvalContext:
        owner = agent if agent is not None else team
        if owner is not None:
            ensure_dual_hooks(owner, Evaluator)
        return snapshot_run(run_output, agent=agent, team=team, user_id=user_id, metadata=metadata,
                            with_tools=self.needs_tools)

    def _admit(self, run_output: Any, agent: Any, team: Any, user_id: str | None,
               metadata: Mapping[str, Any] | None) -> tuple[EvalContext, float] | None:
        """Both shells' first step: the snapshot and its sampling rate, or None when this run is not
        graded here (sampled out, filtered, or a gate's own repair re-run)."""
        if self._gate is not None and self._gate.stands_aside(agent or team):
            return None
        ctx = self._context(run_output, agent, team, user_id, metadata)
        rate = self._sampler.decide(ctx)
        return None if rate is None else (ctx, rate)

    def post_check(self, run_output: Any, agent: Any = None, team: Any = None, user_id: str | None = None,
                   metadata: Mapping[str, Any] | None = None) -> None:
        """agno's sync post hook: grade this run inline (then gate it), or persist it and hand it off."""
        if (admitted := self._admit(run_output, agent, team, user_id, metadata)) is None:
            return
        ctx, rate = admitted
        if self._dispatcher is not None:
            self._dispatcher.submit(ctx, rate)
            return
        record = runtime.call(self._grade_quietly, ctx, rate)
        if self._gate is not None:
            runtime.call(self._gate.enforce, record, run_output, agent or team, self._snapshot(agent, team),
                         self._grade_quietly, True)

    async def async_post_check(self, run_output: Any, agent: Any = None, team: Any = None,
                               user_id: str | None = None, metadata: Mapping[str, Any] | None = None) -> None:
        """agno's async post hook. Grading runs on the judgehooks loop; the caller's loop only awaits."""
        if (admitted := self._admit(run_output, agent, team, user_id, metadata)) is None:
            return
        ctx, rate = admitted
        if self._dispatcher is not None:
            await self._dispatcher.asubmit(ctx, rate)
            return
        record = await runtime.wait(runtime.submit(self._grade_quietly, ctx, rate))
        if self._gate is not None:
            await self._gate.enforce(record, run_output, agent or team, self._snapshot(agent, team),
                                     self._grade_quietly, False)

    def _snapshot(self, agent: Any, team: Any) -> Callable[[Any], EvalContext]:
        """How the gate snapshots a repair attempt's run, as this hook snapshots the original."""
        return lambda output: snapshot_run(output, agent=agent, team=team, with_tools=self.needs_tools)

    async def _grade_quietly(self, ctx: EvalContext, sample_rate: float = 1.0) -> EvalRecord | None:
        try:
            return await self._pipeline.evaluate(ctx, sample_rate)
        except StoreError as exc:
            # Already logged with the full record by the store writer; a gate still needs the verdict.
            return exc.records[0] if exc.records else None

    # ---- offline grading --------------------------------------------------------------------

    def run(self, *, input: str | None = None, output: Any = None, cases: Sequence[Mapping[str, Any]] | None = None,
            expected_output: str | None = None, print_summary: bool = False, print_results: bool = False,
            run_metrics: Any = None) -> AgentAsJudgeResult:
        """Grade one input/output pair or a batch of `cases` (dicts with input, output and optionally
        expected_output), concurrently up to `max_concurrency`. Raises StoreError (with `.result`)
        only after every case is graded, if the store could not take the records."""
        return runtime.call(self._offline, input, output, cases, expected_output, print_summary, print_results)

    async def arun(self, *, input: str | None = None, output: Any = None,
                   cases: Sequence[Mapping[str, Any]] | None = None, expected_output: str | None = None,
                   print_summary: bool = False, print_results: bool = False, run_metrics: Any = None
                   ) -> AgentAsJudgeResult:
        """`run` for async callers; the grading itself runs on the judgehooks loop."""
        future = runtime.submit(self._offline, input, output, cases, expected_output, print_summary,
                                    print_results)
        return await asyncio.wrap_future(future)

    async def _offline(self, input: str | None, output: Any, cases: Sequence[Mapping[str, Any]] | None,
                       expected_output: str | None, print_summary: bool, print_results: bool
                       ) -> AgentAsJudgeResult:
        contexts = offline.contexts(input, output, cases, expected_output)
        return await offline.grade(self._pipeline, contexts, self.max_concurrency, name=self.evaluator,
                                   print_summary=self.print_summary or print_summary,
                                   print_results=self.print_results or print_results,
                                   save_to=self.file_path_to_save_results)

    def stats(self) -> dict[str, Any]:
        """This evaluator's counters: sampling, and the background queue when there is one."""
        if self._dispatcher is not None:
            return self._dispatcher.stats()
        counts = self._sampler.counts
        return {"evaluator": self.evaluator, "sampled_out": counts.sampled_out, "filtered_out": counts.filtered_out}
