"""The hook shell: what every evaluator does when agno calls it, the same for a judge and a regex.

The admission path, in order, the same for every evaluator kind:

    snapshot -> redact -> sample -> dispatch -> [admit against the spend caps -> grade] -> deliver

`admit` (snapshot with the run's trace, redact, sample: `HookShell.admit`) is the one first step
of both hooks, for run-level and session evaluators alike (a session evaluator snapshots a turn
and samples by session). Then `post_check` / `async_post_check` grade inline on the judgehooks
loop (and gate), or persist and hand off to the background dispatcher (or Redis); a session
evaluator records the turn for its session grader. `run()` / `arun()` take the same path from
`redact` on. The grading steps (caps, every judge call metered and paced) are `Pipeline.grade`,
and every record leaves through `Pipeline.deliver` (store, callbacks, OpenTelemetry event): the
same two on every path, inline, background, offline, sessions, `resume` and Redis workers. The
store, pipeline and dispatcher come from `HookSettings.build`, on first use (at once for
background grading and for a store that spills, which resume what a dead process left), so
composite members build none.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._base.callbacks import wrap_callback
from .._base.caller import as_sync_caller
from .._base.context import EvalContext
from .._base.log import log
from .._base.record import EvalRecord
from .._base.result import AgentAsJudgeResult
from .._grading import tracing
from .._grading.counters import Counters
from .._grading.pipeline import CALLBACKS, Graded, make_skipped
from .._runtime import runtime
from ..exceptions import StoreError
from . import offline, scoring
from .agno_compat import ensure_dual_hooks, fold_judge_usage, install_step_names
from .deployment import SETTINGS, job_spec
from .gate import GATE_LATENCY
from .health import JudgeHealth
from .redaction import redact_context
from .resumed import is_paused
from .sampling import Sampler
from .settings import HookSettings, Wiring
from .snapshot import session_state_of, snapshot_run
from .workflow import workflow_metadata


class HookShell:
    """One evaluator's deployment: settings, sampler, gate, and what they build."""

    def __init__(self, evaluator: Graded, settings: HookSettings, *, needs_tools: bool,
                 spec: Mapping[str, Any] | None) -> None:
        self.evaluator = evaluator
        self.settings = settings
        install_step_names()  # agno's workflows imported before this evaluator: their steps are named
        self.sampler = settings.sampler()
        self.gate = settings.gate_config
        self.needs_tools = needs_tools
        self._spec = job_spec(spec, settings)  # it travels with jobs: outbox rows, Redis
        self._wiring: Wiring | None = None
        self._lock = threading.Lock()
        self._counters = Counters()  # inline grading's (background grading counts in its dispatcher)
        self._count_lock = threading.Lock()
        if settings.builds_at_once:
            self.wiring  # noqa: B018 - resume orphaned jobs and re-deliver spilled records now

    @property
    def wiring(self) -> Wiring:
        if self._wiring is None:
            with self._lock:
                if self._wiring is None:
                    self._wiring = self._build()
        return self._wiring

    def _build(self) -> Wiring:
        wiring = self.settings.build(self.evaluator, sampler=self.sampler, spec=self._spec)
        if wiring.dispatcher is None:  # inline: judgehooks.stats() lists it too (a dispatcher registers itself)
            runtime.add_counted(self)
        return wiring

    def reconfigure(self, changes: Mapping[str, Any], prepare: Callable[[HookSettings], None]) -> HookSettings:
        """Change deployment settings together (`Evaluator.configure`): from the next run; or, when
        what one decides is already built (a store, a running background queue: its definition's
        `changes`), none, raising and naming it. `prepare` gets the new settings first (an LLM
        evaluator rebuilds its judge there)."""
        settings = dataclasses.replace(self.settings, **changes)  # validated as at construction
        wiring = self._wiring
        # agno's AgentOS example turns run_in_background on after construction: a queue starts on what was built
        starts_background = (changes.get("run_in_background") is True and wiring is not None
                             and wiring.dispatcher is None)
        for name in changes:
            rule = SETTINGS[name].metadata["changes"]
            if wiring is None or rule == "live" or (name == "run_in_background" and starts_background) or (
                    rule == "dispatch" and wiring.dispatcher is None):
                continue
            built = "background grading started" if wiring.dispatcher is not None else "its store was built"
            raise dataclasses.FrozenInstanceError(
                f"cannot change {name!r} after {built} (the first run or run_in_background builds it): "
                f"construct the evaluator with {name}=... instead")
        if wiring is None:
            prepare(settings)
        with self._lock:
            self.settings = settings
            self.sampler = Sampler(settings.sample_rate, settings.when, counts=self.sampler.counts)
            self.gate = settings.gate_config
            if wiring is not None:  # the one holder every copy of the pipeline reads
                for name in CALLBACKS:
                    setattr(wiring.pipeline.callbacks, name, wrap_callback(name, getattr(settings, name)))
            self._spec = job_spec(self._spec, settings)  # jobs queued from now on carry the settings that travel
            if starts_background and wiring is not None:
                self._wiring = dataclasses.replace(wiring, dispatcher=settings.dispatcher(
                    wiring.pipeline, wiring.store, sampler=self.sampler, spec=self._spec))
        if settings.builds_at_once:
            self.wiring  # noqa: B018 - e.g. run_in_background=True: start the queue now, as at construction
        return settings

    @property
    def health(self) -> JudgeHealth:
        """The judge's health checks (`golden=`, `canaries=`): made on first use."""
        found: JudgeHealth | None = self.__dict__.get("_health")
        if found is None:
            with self._lock:
                found = self.__dict__.setdefault("_health", JudgeHealth(self))
        assert found is not None
        return found

    @property
    def dispatching(self) -> bool:
        """Whether a background dispatcher runs (queued jobs are filed under the evaluator's name)."""
        return self._wiring is not None and self._wiring.dispatcher is not None

    def respec(self, spec: Mapping[str, Any] | None) -> None:
        """The evaluator's own settings changed: jobs queued from now on carry the new spec."""
        self._spec = job_spec(spec, self.settings)
        if self._wiring is not None and self._wiring.dispatcher is not None:
            self._wiring.dispatcher.spec = None if self._spec is None else json.dumps(self._spec)

    # ---- agno's hooks -----------------------------------------------------------------------

    def admit(self, run_output: Any, agent: Any, team: Any, user_id: str | None,
              metadata: Mapping[str, Any] | None, run_context: Any = None) -> tuple[Any, float, Any] | None:
        """Every hook's first step, for every shell: the snapshot (with the run's OpenTelemetry
        trace ids, redacted by `redact=`), its sampling rate and the run's current span
        (`tracing.current_span`); or None when this run is not graded here (sampled out, filtered,
        or a gate's own repair re-run; a run paused for a person is not finished: the run that
        resumes it is graded, `resumed`). The snapshot is `take`'s: a run's context, or a session
        turn; it copies the session_state agno's `run_context` holds now (a later run may change it)."""
        owner = agent if agent is not None else team
        if is_paused(run_output):
            log.debug("run_paused_not_graded", evaluator=self.evaluator.evaluator_name,
                      run_id=getattr(run_output, "run_id", None))
            return None
        if self.gate is not None and self.gate.stands_aside(owner):
            return None
        if owner is not None:
            ensure_dual_hooks(owner)
        if self.settings.golden is not None or self.settings.canaries is not None:
            self.health.poke()  # a live run: the judge's health check, when one is due (in the background)
        span = tracing.current_span()
        flow = workflow_metadata(run_context)  # a workflow step's run: which workflow, run and step
        taken = self.take(run_output, agent=agent, team=team, user_id=user_id,
                          metadata={**(metadata or {}), **flow} if flow else metadata,
                          trace=(None, None) if span is None else span[:2],
                          session_state=session_state_of(run_context, run_output))
        rate = self.sampler.decide(self.sampled_as(taken))
        return None if rate is None else (taken, rate, span)

    def take(self, run_output: Any, *, agent: Any, team: Any, user_id: str | None,
             metadata: Mapping[str, Any] | None, trace: tuple[str | None, str | None],
             session_state: Any = None) -> Any:
        """Snapshot and redact: the run's context (a session shell takes a turn instead)."""
        return snapshot_run(run_output, agent=agent, team=team, user_id=user_id, metadata=metadata,
                            with_tools=self.needs_tools, trace=trace, redact=self.settings.redact,
                            session_state=session_state)

    def sampled_as(self, taken: Any) -> EvalContext:
        """What sampling decides on: the run (a session shell: its session, so a sampled session
        has every turn and the others none)."""
        assert isinstance(taken, EvalContext)
        return taken

    def post_check(self, run_output: Any, agent: Any, team: Any, user_id: str | None,
                   metadata: Mapping[str, Any] | None, run_context: Any = None) -> None:
        """Grade this run inline (then gate it), or persist it and hand it off."""
        if (admitted := self.admit(run_output, agent, team, user_id, metadata, run_context)) is None:
            return
        ctx, rate, span = admitted
        wiring = self.wiring
        if wiring.dispatcher is not None:
            wiring.dispatcher.submit(ctx, rate)
            return
        with tracing.holding(span):  # inline: the events go on the run's own span
            grade = as_sync_caller(self.grade_quietly)  # an evaluator agent is asked with its sync `run`, as agno does
            latency = None if self.gate is None else self.gate.latency_s
            record = runtime.call(grade, ctx, rate, latency)
            fold_judge_usage(record, getattr(run_output, "metrics", None))
            self._print(record)
            if self.gate is not None:
                runtime.call(self.gate.enforce, record, run_output, agent or team, self._snapshot(agent, team, ctx),
                             grade, True)

    async def async_post_check(self, run_output: Any, agent: Any, team: Any, user_id: str | None,
                               metadata: Mapping[str, Any] | None, run_context: Any = None) -> None:
        """Grading runs on the judgehooks loop; the caller's loop only awaits."""
        if (admitted := self.admit(run_output, agent, team, user_id, metadata, run_context)) is None:
            return
        ctx, rate, span = admitted
        wiring = self.wiring
        if wiring.dispatcher is not None:
            await wiring.dispatcher.asubmit(ctx, rate)
            return
        with tracing.holding(span):  # inline: the events go on the run's own span
            latency = None if self.gate is None else self.gate.latency_s
            record = await runtime.wait(runtime.submit(self.grade_quietly, ctx, rate, latency))
            fold_judge_usage(record, getattr(run_output, "metrics", None))
            self._print(record)
            if self.gate is not None:
                await self.gate.enforce(record, run_output, agent or team, self._snapshot(agent, team, ctx),
                                        self.grade_quietly, False)

    def _snapshot(self, agent: Any, team: Any, original: EvalContext) -> Callable[[Any], EvalContext]:
        """How the gate snapshots a repair attempt's run, as this hook snapshots the original (in
        the original run's trace: its events go where the original's go), with the session_state the
        original was judged with (already redacted: it is not redacted twice)."""

        def snapshot(output: Any) -> EvalContext:
            ctx = snapshot_run(output, agent=agent, team=team, with_tools=self.needs_tools,
                               trace=(original.trace_id, original.span_id), redact=self.settings.redact)
            return dataclasses.replace(ctx, session_state=original.session_state)

        return snapshot

    def _print(self, record: EvalRecord | None) -> None:
        """`print_results` / `print_summary` on a post hook: agno's evaluator prints its tables after
        every run it grades inline (a one-evaluation result), and so does this one. Background
        grading prints nothing: the run has returned before its verdict exists."""
        settings = self.settings
        if record is None or not (settings.print_results or settings.print_summary):
            return
        result = AgentAsJudgeResult(run_id=record.run_id or "", results=[record])
        result.out_of = self.evaluator.scale
        if settings.print_results:
            result.print_results()
        if settings.print_summary:
            result.print_summary()

    async def ascore(self, run_output: Any, expected: Any) -> Any:
        """agno's Scorer protocol (`scoring`): the run snapshotted as the hook does, graded inline on
        the judgehooks loop through this evaluator's pipeline (one stored record), as a ``Score``."""
        ctx = snapshot_run(run_output, with_tools=self.needs_tools, redact=self.settings.redact,
                           session_state=session_state_of(None, run_output))
        record = await runtime.wait(runtime.submit(self.grade_quietly, scoring.with_expected(ctx, expected)))
        return scoring.score_of(record, self.evaluator.scale)

    async def grade_quietly(self, ctx: EvalContext, sample_rate: float = 1.0,
                            latency_s: float | None = None) -> EvalRecord | None:
        """Grade and deliver one run; with a gate's `latency_s`, the record `in_time` gives."""
        with self._count_lock:
            self._counters.submitted += 1
        record: EvalRecord | None
        pipeline = self.wiring.pipeline
        try:
            record = await (pipeline.grade(ctx, sample_rate) if latency_s is None
                            else self._in_time(ctx, sample_rate, latency_s))
            if (error := await pipeline.deliver([record])) is not None:
                raise error  # as `Pipeline.evaluate`: after the record's callbacks
        except StoreError as exc:
            # Already logged with the full record by the store writer; a gate still needs the verdict.
            record = exc.records[0] if exc.records else None
            with self._count_lock:
                self._counters.store_failures += 1
        with self._count_lock:
            self._counters.finished(record)
        return record

    async def _in_time(self, ctx: EvalContext, sample_rate: float, latency_s: float) -> EvalRecord:
        """The verdict if it comes within `latency_s`; else the grading is cancelled (nothing of it
        is stored yet: `Pipeline.grade` only grades) and the record is a `skipped` one saying the
        gate decided by its `gate_on_timeout` policy, not by a verdict."""
        pipeline = self.wiring.pipeline
        task = asyncio.ensure_future(pipeline.grade(ctx, sample_rate))
        done, _ = await asyncio.wait({task}, timeout=latency_s)
        if not done:
            task.cancel()
            await asyncio.wait({task})  # let it unwind (a spend-cap ticket given back)
        if not task.cancelled():
            return task.result()  # it finished, even if only as the budget ran out
        assert self.gate is not None
        log.warning("gate_timed_out", evaluator=self.evaluator.evaluator_name, run_id=ctx.run_id,
                    latency_s=latency_s, decision=self.gate.on_timeout)
        return make_skipped(ctx, self.evaluator, GATE_LATENCY, sample_rate,
                            {"decided_by": "policy", "gate_on_timeout": self.gate.on_timeout,
                             "gate_latency_s": latency_s})

    # ---- offline grading --------------------------------------------------------------------

    def run(self, input: str | None, output: Any, cases: Sequence[Mapping[str, Any]] | None,
            expected_output: str | None, print_summary: bool, print_results: bool,
            run_metrics: Any = None) -> AgentAsJudgeResult:
        result = runtime.call(as_sync_caller(self._offline), input, output, cases, expected_output, print_summary,
                              print_results)
        for record in result.results:
            fold_judge_usage(record, run_metrics)
        return result

    async def arun(self, input: str | None, output: Any, cases: Sequence[Mapping[str, Any]] | None,
                   expected_output: str | None, print_summary: bool, print_results: bool,
                   run_metrics: Any = None) -> AgentAsJudgeResult:
        future = runtime.submit(self._offline, input, output, cases, expected_output, print_summary, print_results)
        result: AgentAsJudgeResult = await asyncio.wrap_future(future)
        for record in result.results:
            fold_judge_usage(record, run_metrics)
        return result

    async def _offline(self, input: str | None, output: Any, cases: Sequence[Mapping[str, Any]] | None,
                       expected_output: str | None, print_summary: bool, print_results: bool) -> AgentAsJudgeResult:
        settings, wiring = self.settings, self.wiring
        contexts = offline.contexts(input, output, cases, expected_output)
        if settings.redact is not None:
            contexts = [redact_context(ctx, settings.redact) for ctx in contexts]
        return await offline.grade(wiring.offline, contexts, settings.max_concurrency,
                                   name=self.evaluator.evaluator_name,
                                   print_summary=settings.print_summary or print_summary,
                                   print_results=settings.print_results or print_results,
                                   save_to=settings.file_path_to_save_results, agno=wiring.agno)

    def stats(self) -> dict[str, Any]:
        """Counters: sampling, and the background queue when there is one."""
        if self._wiring is not None and self._wiring.dispatcher is not None:
            return self._wiring.dispatcher.stats()
        counts = self.sampler.counts
        spend = None if self._wiring is None else self._wiring.pipeline.spend
        with self._count_lock:
            graded = self._counters.as_dict()
        return {"evaluator": self.evaluator.evaluator_name, "inline": True, **graded,
                "in_flight": graded["submitted"] - graded["done"], "sampled_out": counts.sampled_out,
                "filtered_out": counts.filtered_out, **({} if spend is None else spend.stats())}
