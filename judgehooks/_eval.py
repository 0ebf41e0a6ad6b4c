"""AgentAsJudgeEval: agno's evaluator API, graded by the judgehooks core.

The hook methods are thin shells: snapshot the run, then grade inline on the judgehooks loop or
hand off to the background. The same core serves offline `run()` / `arun()` batches.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from agno.eval.base import BaseEval

from . import _background, _portal
from ._callbacks import wrap_callback
from ._context import EvalContext, render_content, snapshot_run
from ._core import Grading, Pipeline, RetryPolicy
from ._errors import StoreError
from ._gate import DEFAULT_FALLBACK, Gate
from ._hooklist import ensure_dual_hooks
from ._judge import AgnoJudge, Judge, LiteLLMJudge
from ._judgeproc import ProcessJudge
from ._log import log
from ._record import EvalRecord
from ._result import AgentAsJudgeResult
from ._sampling import Sampler, SampleRate
from .dispatch import OVERLOAD_POLICIES, Dispatcher, Outbox
from .stores import JsonlStore, MemoryStore, SQLiteStore, Store, default_store
from .stores._spill import SpillingStore
from .stores._sqlite import outbox_path_for

DEFAULT_MODEL = "openai/gpt-5-mini"  # agno's default judge, through litellm


def _check_number(name: str, value: Any, *, minimum: float, allow_equal: bool, integer: bool = False) -> None:
    bad_type = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
    if bad_type or value < minimum or (value == minimum and not allow_equal):
        kind = "an integer" if integer else "a number"
        bound = f">= {minimum}" if allow_equal else f"> {minimum}"
        raise ValueError(f"{name} must be {kind} {bound}, got {value!r}")


def check_grading(criteria: Any, scoring_strategy: Any, threshold: Any) -> None:
    """The judge settings every LLM evaluator (and judge template) shares, checked once."""
    if not isinstance(criteria, str) or not criteria.strip():
        raise ValueError("criteria must be a non-empty string saying what a good output is, "
                         f"got {criteria!r}")
    if scoring_strategy not in ("binary", "numeric"):
        raise ValueError(f"scoring_strategy must be 'binary' or 'numeric', got {scoring_strategy!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= 10:
        raise ValueError(f"threshold must be an integer from 1 to 10, got {threshold!r}")


def guidelines_tuple(value: str | Sequence[str] | None, name: str = "additional_guidelines") -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(f"{name} must be a string or a list of strings, got {type(value).__name__}")


def _default_name(criteria: str, mode: str, threshold: int | None) -> str:
    digest = hashlib.sha1(f"{criteria}\x1f{mode}\x1f{threshold}".encode()).hexdigest()[:10]
    return f"agent_as_judge-{digest}"


def _check_broker(broker: Any, run_in_background: bool) -> None:
    """broker= must be a Redis URL, with background grading, and the `redis` extra installed."""
    from .distributed import check_url, require_extra

    check_url(broker, "broker")
    if not run_in_background:
        raise ValueError("broker= hands grading to `judgehooks worker` processes, which is background grading: "
                         "set run_in_background=True as well")
    require_extra("broker")


def rebuildable(spec: Mapping[str, Any] | None) -> bool:
    """Whether another process can rebuild an evaluator from its spec (a litellm model string)."""
    return bool(spec and spec.get("model"))


def from_spec(spec: Mapping[str, Any], **overrides: Any) -> AgentAsJudgeEval:
    """Rebuild an evaluator in another process from the settings its jobs carry (`_spec`)."""
    settings = {k: v for k, v in spec.items() if v is not None}
    return AgentAsJudgeEval(**{**settings, **overrides})


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


class AgentAsJudgeEval(BaseEval):
    """Grade agno Agent and Team runs with an LLM judge, as a post hook or offline.

    Takes agno's `AgentAsJudgeEval` parameters, in agno's order and with agno's defaults, so
    ``from judgehooks import AgentAsJudgeEval`` is a drop-in swap. Beyond agno's: ``on_error``,
    ``store``, the judge's connection and retry settings, ``include_tool_calls`` and ``judge``
    (any object with ``async complete(request)``, e.g. `judgehooks.testing.FakeJudge`).

    Every evaluation ends as one `EvalRecord` in ``store`` (SQLite by default): passed, failed, or
    error when the judge cannot be reached or read. ``on_fail`` gets failed records and
    ``on_error`` error records, sync or async, from ``run()`` and ``arun()`` alike.
    """

    def __init__(
        self,
        criteria: str = "",
        scoring_strategy: Literal["numeric", "binary"] = "binary",
        threshold: int = 7,
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
        on_error: Callable[[EvalRecord], Any] | None = None,
        store: Store | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        retry_backoff: float = 0.5,
        temperature: float | None = None,
        structured_output: bool = True,
        litellm_kwargs: Mapping[str, Any] | None = None,
        include_tool_calls: bool = False,
        max_concurrency: int = 32,
        judge: Judge | None = None,
        sample_rate: SampleRate = 1.0,
        when: Callable[[EvalContext], bool] | None = None,
        max_queue: int = 10_000,
        overload: str = "block",
        block_timeout: float = 5.0,
        on_drop: Callable[[EvalRecord], Any] | None = None,
        outbox: str | os.PathLike[str] | bool | None = None,
        requests_per_minute: float | None = None,
        judge_process: bool | None = None,
        judge_processes: int | None = None,
        gate: bool = False,
        fallback: str = DEFAULT_FALLBACK,
        repair: int = 0,
        on_record: Callable[[EvalRecord], Any] | None = None,
        context_key: str | None = None,
        spill: str | os.PathLike[str] | bool | None = None,
        broker: str | None = None,
    ) -> None:
        check_grading(criteria, scoring_strategy, threshold)
        _check_number("timeout", timeout, minimum=0, allow_equal=False)
        _check_number("retries", retries, minimum=0, allow_equal=True, integer=True)
        _check_number("retry_backoff", retry_backoff, minimum=0, allow_equal=True)
        _check_number("max_concurrency", max_concurrency, minimum=1, allow_equal=True, integer=True)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"name must be a non-empty string or None, got {name!r}")
        if model is not None and not isinstance(model, str) and not hasattr(model, "aresponse"):
            raise TypeError(f"model must be a litellm model string (e.g. 'openai/gpt-4o-mini') or an agno Model, "
                            f"got {type(model).__name__}")
        if store is not None and not (hasattr(store, "write") and hasattr(store, "query")):
            raise TypeError(f"store must implement judgehooks.stores.Store (write, query), got {type(store).__name__}")
        if judge is not None and not hasattr(judge, "complete"):
            raise TypeError(f"judge must have `async complete(request)`, got {type(judge).__name__}")
        Sampler.validate(sample_rate, when)
        self._gate = Gate.configure(gate=gate, fallback=fallback, repair=repair, run_in_background=run_in_background)
        if context_key is not None and (not isinstance(context_key, str) or not context_key):
            raise ValueError(f"context_key must be a run metadata key (a non-empty string) or None, "
                             f"got {context_key!r}")
        if judge_processes is not None:
            _check_number("judge_processes", judge_processes, minimum=1, allow_equal=True, integer=True)
        _check_number("max_queue", max_queue, minimum=1, allow_equal=True, integer=True)
        _check_number("block_timeout", block_timeout, minimum=0, allow_equal=True)
        if overload not in OVERLOAD_POLICIES:
            raise ValueError(f"overload must be one of {', '.join(map(repr, OVERLOAD_POLICIES))}, got {overload!r}")
        if requests_per_minute is not None:
            _check_number("requests_per_minute", requests_per_minute, minimum=0, allow_equal=False)
        if broker is not None:
            _check_broker(broker, run_in_background)
        if outbox is not None and not isinstance(outbox, (bool, str, os.PathLike)):
            raise TypeError(f"outbox must be a path, True/None (next to the store) or False (no outbox), "
                            f"got {type(outbox).__name__}")
        if spill is not None and not isinstance(spill, (bool, str, os.PathLike)):
            raise TypeError(f"spill must be a path, True (in the outbox file), False (off) or None (on for "
                            f"stores that are not local files), got {type(spill).__name__}")

        # agno's public attributes, same names and meaning.
        self.criteria = criteria
        self.scoring_strategy = scoring_strategy
        self.threshold = threshold
        self.on_fail = on_fail
        self.on_error = on_error
        self.additional_guidelines = additional_guidelines
        self.name = name
        self.model = model
        self.evaluator_agent = evaluator_agent
        self.print_summary = print_summary
        self.print_results = print_results
        self.show_spinner = show_spinner
        self.file_path_to_save_results = file_path_to_save_results
        self.debug_mode = debug_mode
        self.db = db
        self.telemetry = telemetry  # accepted for compatibility; judgehooks never sends telemetry
        self.run_in_background = run_in_background
        self.include_tool_calls = include_tool_calls
        self.max_concurrency = max_concurrency
        self.sample_rate = sample_rate
        self.when = when
        self.max_queue = max_queue
        self.overload = overload
        self.on_drop = on_drop
        self._sampler = Sampler(sample_rate, when)

        mode_threshold = threshold if scoring_strategy == "numeric" else None
        self.evaluator = name or _default_name(criteria, scoring_strategy, mode_threshold)
        if judge is None:
            if evaluator_agent is not None:
                judge = AgnoJudge(evaluator_agent=evaluator_agent)
            elif model is not None and not isinstance(model, str):
                judge = AgnoJudge(model=model)
            else:
                judge = LiteLLMJudge(model or os.environ.get("JUDGEHOOKS_MODEL") or DEFAULT_MODEL,
                                     api_base=api_base, api_key=api_key, timeout=timeout, temperature=temperature,
                                     structured_output=structured_output, litellm_kwargs=litellm_kwargs)
        if judge_process is None:  # with a broker, workers judge: this process never calls litellm
            judge_process = run_in_background and broker is None and isinstance(judge, LiteLLMJudge)
        if judge_process:
            if not isinstance(judge, LiteLLMJudge):
                raise ValueError("judge_process=True needs a litellm model string judge, not an agno Model, "
                                 "evaluator_agent or custom judge")
            judge = ProcessJudge(judge, judge_processes or 1)
        self.store: Store = store if store is not None else default_store()
        sink: Store = self.store
        if db is not None:
            from .stores._agno import AgnoDbStore, FanoutStore

            sink = FanoutStore(self.store, AgnoDbStore(db))
        spill_path = _spill_for(spill, outbox, self.store, local=db is None)
        if spill_path is not None:
            sink = SpillingStore(sink, spill_path)
        self._pipeline = Pipeline(
            grading=Grading(evaluator=self.evaluator, criteria=criteria, mode=scoring_strategy,
                            threshold=mode_threshold, guidelines=guidelines_tuple(additional_guidelines),
                            include_tools=include_tool_calls, context_key=context_key, timeout=timeout,
                            retry=RetryPolicy(retries=retries, backoff=retry_backoff)),
            judge=judge,
            store=sink,
            on_fail=wrap_callback("on_fail", on_fail),
            on_error=wrap_callback("on_error", on_error),
            on_record=wrap_callback("on_record", on_record),
        )
        self._dispatcher: Dispatcher | None = None
        if run_in_background:
            dispatcher_class: Any = Dispatcher
            extra: dict[str, Any] = {}
            if broker is not None:
                from .distributed._forwarder import Forwarder

                dispatcher_class, extra = Forwarder, {"broker_url": broker}
            self._dispatcher = dispatcher_class(
                self._pipeline, outbox=_outbox_for(outbox, self.store), max_queue=max_queue,
                max_concurrency=max_concurrency, overload=overload, block_timeout=block_timeout,  # type: ignore[arg-type]
                on_drop=wrap_callback("on_drop", on_drop), requests_per_minute=requests_per_minute,
                spec=self._spec(judge, api_base, timeout, retries, retry_backoff, temperature, structured_output),
                sampling=self._sampler.counts, **extra)
            self._dispatcher.start()  # also resumes this evaluator's jobs left by a dead process

    def __repr__(self) -> str:
        return (f"AgentAsJudgeEval(name={self.evaluator!r}, scoring_strategy={self.scoring_strategy!r}, "
                f"threshold={self.threshold!r}, judge={self._pipeline.judge.model!r})")

    # An eval is immutable configuration plus shared resources: agno's deep copies share it.
    def __copy__(self) -> AgentAsJudgeEval:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> AgentAsJudgeEval:
        return self

    # ---- agno hook shells -------------------------------------------------------------------

    def pre_check(self, run_input: Any) -> None:
        raise ValueError("judgehooks.AgentAsJudgeEval grades finished runs: put it in post_hooks, not pre_hooks")

    async def async_pre_check(self, run_input: Any) -> None:
        self.pre_check(run_input)

    def _context(self, run_output: Any, agent: Any, team: Any, user_id: str | None,
                 metadata: Mapping[str, Any] | None) -> EvalContext:
        owner = agent if agent is not None else team
        if owner is not None:
            ensure_dual_hooks(owner, AgentAsJudgeEval)
        return snapshot_run(run_output, agent=agent, team=team, user_id=user_id, metadata=metadata,
                            with_tools=self.include_tool_calls)

    def post_check(self, run_output: Any, agent: Any = None, team: Any = None, user_id: str | None = None,
                   metadata: Mapping[str, Any] | None = None) -> None:
        """agno's sync post hook: grade this run inline, or persist it and hand it off."""
        if self._gate is not None and self._gate.stands_aside(agent or team):
            return
        ctx = self._context(run_output, agent, team, user_id, metadata)
        rate = self._sampler.decide(ctx)
        if rate is None:
            return
        if self._dispatcher is not None:
            self._dispatcher.submit(ctx, rate)
            return
        record = _portal.call(self._grade_quietly, ctx, rate)
        if self._gate is not None:
            _portal.call(self._gate.enforce, record, run_output, agent or team, self._snapshot(agent, team),
                         self._grade_quietly, True)

    async def async_post_check(self, run_output: Any, agent: Any = None, team: Any = None,
                               user_id: str | None = None, metadata: Mapping[str, Any] | None = None) -> None:
        """agno's async post hook. Grading runs on the judgehooks loop; the caller's loop only awaits."""
        if self._gate is not None and self._gate.stands_aside(agent or team):
            return
        ctx = self._context(run_output, agent, team, user_id, metadata)
        rate = self._sampler.decide(ctx)
        if rate is None:
            return
        if self._dispatcher is not None:
            await self._dispatcher.asubmit(ctx, rate)
            return
        record = await _background.wait(_background.submit(self._grade_quietly, ctx, rate))
        if self._gate is not None:
            await self._gate.enforce(record, run_output, agent or team, self._snapshot(agent, team),
                                     self._grade_quietly, False)

    def _snapshot(self, agent: Any, team: Any) -> Callable[[Any], EvalContext]:
        """How the gate snapshots a repair attempt's run, as this hook snapshots the original."""
        return lambda output: snapshot_run(output, agent=agent, team=team, with_tools=self.include_tool_calls)

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
        return _portal.call(self._offline, input, output, cases, expected_output, print_summary, print_results)

    async def arun(self, *, input: str | None = None, output: Any = None,
                   cases: Sequence[Mapping[str, Any]] | None = None, expected_output: str | None = None,
                   print_summary: bool = False, print_results: bool = False, run_metrics: Any = None
                   ) -> AgentAsJudgeResult:
        """`run` for async callers; the grading itself runs on the judgehooks loop."""
        future = _background.submit(self._offline, input, output, cases, expected_output, print_summary,
                                    print_results)
        return await asyncio.wrap_future(future)

    async def _offline(self, input: str | None, output: Any, cases: Sequence[Mapping[str, Any]] | None,
                       expected_output: str | None, print_summary: bool, print_results: bool
                       ) -> AgentAsJudgeResult:
        contexts = self._offline_contexts(input, output, cases, expected_output)
        run_id = contexts[0].run_id or ""
        outcomes = await self._pipeline.evaluate_many(contexts, self.max_concurrency)
        records: list[EvalRecord] = []
        store_errors: list[StoreError] = []
        for outcome in outcomes:
            if isinstance(outcome, StoreError):
                store_errors.append(outcome)
                records.extend(outcome.records)
            else:
                records.append(outcome)
        result = AgentAsJudgeResult(run_id=run_id, records=records)
        if self.print_results or print_results:
            result.print_results()
        if self.print_summary or print_summary:
            result.print_summary()
        if self.file_path_to_save_results:
            self._save(result)
        if store_errors:
            error = StoreError(f"{len(store_errors)} of {len(records)} record(s) were not stored: {store_errors[0]}")
            error.records = [r for e in store_errors for r in e.records]
            error.result = result  # type: ignore[attr-defined]
            raise error
        return result

    def _offline_contexts(self, input: str | None, output: Any, cases: Sequence[Mapping[str, Any]] | None,
                          expected_output: str | None) -> list[EvalContext]:
        single = input is not None or output is not None
        if single and cases is not None:
            raise ValueError("provide either input and output, or cases, not both")
        if not single and cases is None:
            raise ValueError("provide input and output, or cases=[{'input': ..., 'output': ...}, ...]")
        if single:
            if input is None or output is None:
                raise ValueError("both input and output are required to grade a single case")
            cases = [{"input": input, "output": output, "expected_output": expected_output}]
        assert cases is not None
        if len(cases) == 0:
            raise ValueError("cases is empty: nothing to grade")
        run_id = str(uuid.uuid4())
        contexts = []
        for i, case in enumerate(cases):
            if not isinstance(case, Mapping) or "input" not in case or "output" not in case:
                raise ValueError(f"cases[{i}] must be a mapping with 'input' and 'output', got {case!r:.120}")
            expected = case.get("expected_output", case.get("expected"))
            contexts.append(EvalContext(
                input=render_content(case["input"]), output=render_content(case["output"]),
                expected=None if expected is None else render_content(expected),
                run_id=run_id, case_index=i, metadata=dict(case.get("metadata") or {})))
        return contexts

    def _spec(self, judge: Judge, api_base: str | None, timeout: float, retries: int, retry_backoff: float,
              temperature: float | None, structured_output: bool) -> dict[str, Any]:
        """What `judgehooks resume` needs to rebuild this evaluator in another process (no secrets)."""
        g = self._pipeline.grading
        return {"name": g.evaluator, "criteria": g.criteria, "scoring_strategy": g.mode,
                "threshold": self.threshold, "additional_guidelines": list(g.guidelines),
                "include_tool_calls": g.include_tools, "context_key": g.context_key,
                "model": judge.model if isinstance(judge, (LiteLLMJudge, ProcessJudge)) else None,
                "api_base": api_base, "timeout": timeout, "retries": retries, "retry_backoff": retry_backoff,
                "temperature": temperature, "structured_output": structured_output}

    def stats(self) -> dict[str, Any]:
        """This evaluator's counters: sampling, and the background queue when there is one."""
        if self._dispatcher is not None:
            return self._dispatcher.stats()
        counts = self._sampler.counts
        return {"evaluator": self.evaluator, "sampled_out": counts.sampled_out, "filtered_out": counts.filtered_out}

    def _save(self, result: AgentAsJudgeResult) -> None:
        path = Path(self.file_path_to_save_results.format(name=self.evaluator, run_id=result.run_id))
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"run_id": result.run_id, "pass_rate": result.pass_rate, "error_count": result.error_count,
                   "avg_score": result.avg_score, "records": [r.model_dump(mode="json") for r in result.records]}
        path.write_text(json.dumps(payload, indent=2))
        log.info("results_saved", path=str(path), records=len(result.records))
