"""Offline grading: `run()` / `arun()` over one input/output pair or a batch of cases.

The same pipeline as live runs, many contexts at once (bounded), with agno-shaped results whose
statistics count only graded cases: errors are reported beside the pass rate, never inside it.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import anyio

from .._base.context import EvalContext, render_content
from .._base.log import log
from .._base.record import EvalRecord
from .._base.result import AgentAsJudgeResult
from .._base.sqlitefile import create_file
from .._base.text import storable_data
from .._grading.pipeline import Pipeline
from ..exceptions import StoreError
from ..stores import AgnoDbStore, Store, write_with_retry
from .snapshot import plain_state


class _Batch:
    """The agno db as a store that takes one offline batch as one eval run (retried like any write)."""

    def __init__(self, agno: AgnoDbStore, run_id: str) -> None:
        self.agno, self.run_id = agno, run_id

    def __repr__(self) -> str:
        return repr(self.agno)

    async def write(self, records: Sequence[EvalRecord]) -> None:
        await self.agno.write_batch(self.run_id, records)


def contexts(input: str | None, output: Any, cases: Sequence[Mapping[str, Any]] | None,
             expected_output: str | None) -> list[EvalContext]:
    """The contexts to grade: one pair, or every case (dicts with input, output, and optionally
    expected_output, metadata and session_state)."""
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
    # One id for the batch (the result's `run_id`, agno's eval run), and one per case derived from it,
    # so each case's record is found by its own run id, as a live run's is.
    batch = str(uuid.uuid4())
    found = []
    for i, case in enumerate(cases):
        if not isinstance(case, Mapping) or "input" not in case or "output" not in case:
            raise ValueError(f"cases[{i}] must be a mapping with 'input' and 'output', got {case!r:.120}")
        expected = case.get("expected_output", case.get("expected"))
        found.append(EvalContext(
            input=render_content(case["input"]), output=render_content(case["output"]),
            expected=None if expected is None else render_content(expected),
            run_id=batch if single else case_run_id(batch, i), case_index=i,
            metadata=storable_data(dict(case.get("metadata") or {})),
            session_state=plain_state(case.get("session_state"))))
    return found


def case_run_id(batch: str, index: int) -> str:
    """The run id of case `index` of the offline batch `batch`: ``<batch>:<index>``."""
    return f"{batch}:{index}"


def batch_of(run_id: str) -> str:
    """The batch's own id, from any of its cases' run ids (a single pair's is the batch's)."""
    return run_id.rpartition(":")[0] or run_id


async def grade(pipeline: Pipeline, contexts: Sequence[EvalContext], limit: int, *, name: str,
                print_summary: bool = False, print_results: bool = False,
                save_to: str | None = None, agno: AgnoDbStore | None = None) -> AgentAsJudgeResult:
    """Grade every context, at most `limit` at once; with an agno db, write the batch there as one
    eval run. Raises StoreError (with `.result`) only after every case is graded, if a store could
    not take the records."""
    outcomes = await _graded_in_case_order(pipeline, contexts, limit)
    records: list[EvalRecord] = []
    store_errors: list[StoreError] = []
    for outcome in outcomes:
        if isinstance(outcome, StoreError):
            store_errors.append(outcome)
            records.extend(outcome.records)
        else:
            records.append(outcome)
    result = AgentAsJudgeResult(run_id=batch_of(contexts[0].run_id or ""), results=records)
    result.out_of = pipeline.evaluator.scale
    if print_results:
        result.print_results()
    if print_summary:
        result.print_summary()
    if save_to:
        save(result, save_to, name)
    if agno is not None:
        try:
            await write_with_retry(cast(Store, _Batch(agno, result.run_id)), records)
        except StoreError as exc:
            exc.records = records
            store_errors.append(exc)
    if store_errors:
        error = StoreError(f"{len(store_errors)} of {len(records)} record(s) were not stored: {store_errors[0]}")
        error.records = [r for e in store_errors for r in e.records]
        error.result = result
        raise error
    return result


async def _graded_in_case_order(pipeline: Pipeline, contexts: Sequence[EvalContext],
                                limit: int) -> list[EvalRecord | StoreError]:
    """Grade every context, at most `limit` at once, each stored as soon as it is graded; results in
    case order (a StoreError, holding its records, for a case its store did not take). Callbacks
    (on_fail, on_error, on_record) run in case order too, as agno calls them: a case's wait for the
    cases before it, while grading goes on. A batch's users, and agno's own tests, read them in order."""
    results: list[EvalRecord | StoreError | None] = [None] * len(contexts)
    delivered = [anyio.Event() for _ in contexts]
    records: list[EvalRecord | None] = [None] * len(contexts)
    semaphore = anyio.Semaphore(limit)

    async def one(i: int, ctx: EvalContext) -> None:
        try:
            async with semaphore:
                record = await pipeline.grade(ctx)
                records[i] = record
                _, error = await pipeline.store_batch([record])  # deliver's first half: called back below
                results[i] = record if error is None else error
        finally:
            delivered[i].set()

    async def call_back_in_order() -> None:
        for i, ready in enumerate(delivered):
            await ready.wait()
            record = records[i]
            if record is not None:
                await pipeline.notify(record, stored=not isinstance(results[i], StoreError))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call_back_in_order)
        for i, ctx in enumerate(contexts):
            tg.start_soon(one, i, ctx)
    return cast(list[EvalRecord | StoreError], results)


def file_name(text: str) -> str:
    """`text` as one safe file name: no path separators, no `..`, no control characters, at most 100
    characters, so an evaluator name such as ``../../etc/x`` cannot lead a path out of its folder."""
    name = re.sub(r"[^\w.-]+", "_", text).strip("._")[:100]
    return name or "evaluator"


def save(result: AgentAsJudgeResult, template: str, name: str) -> None:
    """Write the batch's results as JSON to `template` ({name} and {run_id} are filled in, each as a
    safe file name)."""
    path = Path(template.format(name=file_name(name), run_id=file_name(result.run_id)))
    path.parent.mkdir(parents=True, exist_ok=True)
    create_file(str(path))  # 0600 when new: it holds users' inputs and answers
    path.write_text(json.dumps(result.to_json(), indent=4))
    log.info("results_saved", path=str(path), records=len(result.results))
