"""Judge health: an evaluator graded against a labelled golden set and planted canaries.

    judge = AgentAsJudgeEval(..., golden="golden.jsonl", canaries="canaries.jsonl", health_every="24h")

When a live run first meets an evaluator version, and then every `health_every`, the golden cases
(inputs and outputs people labelled, as ``judgehooks export --labelled`` writes them) and the
canaries (answers planted to be wrong) are graded in the background, through the evaluator's own
offline pipeline (its redactor, spend caps and pace; no review routing; nothing of them stored), and
ONE health record is stored and delivered through the live pipeline (store, ``on_fail``, the
notifiers): evaluator ``<name>:health``, scope ``health``, score Cohen's kappa against the labels,
threshold ``golden_min_kappa``, with the canary catch rate and the change from the previous version
in its details. A kappa below the threshold, or a canary that passed, is a failed record: an alert.
A check whose every case errored is an ``error`` record, never a failure.

One check per version per `health_every` window across processes: the record's id is derived from
the version and the window, so two processes checking at once store one record.
"""

from __future__ import annotations

import math
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio

from .._base.agreement import Confusion
from .._base.context import EvalContext, render_content
from .._base.jsonlines import json_lines
from .._base.log import log
from .._base.record import EvalRecord, new_record, record_id
from .._base.when import parse_duration
from .._runtime import runtime
from .redaction import redact_context


class HookShell(Protocol):
    """What a health check reads of the hook shell (`shell.HookShell`): the settings, the evaluator and
    what they built (the store, the live pipeline that delivers, the offline one that grades)."""

    @property
    def settings(self) -> Any: ...

    @property
    def evaluator(self) -> Any: ...

    @property
    def wiring(self) -> Any: ...

#: what a health record's evaluator name ends with, after the evaluator's own
SUFFIX = ":health"
#: the longest line of a golden or canary file read, in bytes; and the most cases in one set
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_CASES = 10_000
#: a failed check is tried again after this many seconds at most (the judge may be down)
RETRY_S = 300.0


@dataclass(frozen=True, slots=True)
class HealthCase:
    """One golden case (`passed`: what people said) or canary (`passed` is False: it must fail)."""

    id: str
    input: str
    output: str
    passed: bool
    expected: str | None = None


@dataclass(frozen=True, slots=True)
class CaseSet:
    """A golden set or the canaries, read and checked once: `source` names where they came from."""

    source: str
    cases: tuple[HealthCase, ...]

    def __repr__(self) -> str:
        return f"CaseSet({self.source!r}, {len(self.cases)} cases)"


def _label(line: Mapping[str, Any], where: str) -> bool:
    """A golden line's label: ``"passed": true|false``, or ``"label": "pass"|"fail"``."""
    passed = line.get("passed")
    if isinstance(passed, bool):
        return passed
    label = line.get("label")
    if label in ("pass", "fail"):
        return bool(label == "pass")
    raise ValueError(f"{where}: a golden case needs its label, \"passed\": true or false (or \"label\": \"pass\" "
                     f"or \"fail\"), as `judgehooks export --labelled` writes; got passed={passed!r:.40}, "
                     f"label={label!r:.40}")


def _case(line: Any, where: str, *, golden: bool) -> HealthCase:
    if not isinstance(line, Mapping):
        raise ValueError(f"{where}: a case is a JSON object with input and output, got {type(line).__name__}")
    for key in ("input", "output"):
        if not isinstance(line.get(key), str) or (key == "input" and not line[key].strip()):
            raise ValueError(f"{where}: {key!r} must be {'non-empty ' if key == 'input' else ''}text, "
                             f"got {line.get(key)!r:.60}")
    if golden:
        passed = _label(line, where)
    else:
        if line.get("passed") is True or line.get("label") == "pass":
            raise ValueError(f"{where}: a canary is an answer planted to be wrong: it cannot be labelled as passing")
        passed = False
    expected = line.get("expected_output", line.get("expected"))
    return HealthCase(id=str(line.get("id") or where), input=line["input"], output=render_content(line["output"]),
                      passed=passed, expected=None if expected is None else render_content(expected))


def read_set(setting: str, value: Any) -> CaseSet | None:
    """`golden=` or `canaries=`: None, a JSONL file (one case a line), or a list of dicts. ValueError
    names the setting and the first bad line; the cases are read once, here."""
    if value is None or isinstance(value, CaseSet):
        return value
    golden = setting == "golden"
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        cases = []
        try:
            for number, line in json_lines(path, max_line_bytes=MAX_LINE_BYTES):
                cases.append(_case(line, f"line {number}", golden=golden))
                if len(cases) > MAX_CASES:
                    raise ValueError(f"more than {MAX_CASES} cases")
        except OSError as exc:
            raise ValueError(f"{setting}={path!r}: cannot read it: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ValueError(f"{setting}={path!r}: {exc}") from None
        source = path
    elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        if len(value) > MAX_CASES:
            raise ValueError(f"{setting}: more than {MAX_CASES} cases")
        cases = [_case(line, f"{setting}[{i}]", golden=golden) for i, line in enumerate(value)]
        source = f"{len(cases)} cases given"
    else:
        raise TypeError(f"{setting} must be a JSONL file path or a list of dicts with input and output, "
                        f"got {type(value).__name__}")
    if not cases:
        raise ValueError(f"{setting}: no cases in {source}")
    return CaseSet(source, tuple(cases))


def check_every(name: str, value: Any) -> Any:
    """`health_every`: None (once per version), seconds, or a duration such as "24h"."""
    if value is None:
        return None
    seconds = parse_duration(value) if isinstance(value, str) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or seconds < 60:
        raise ValueError(f"{name} must be a duration of at least a minute (\"30m\", \"24h\", \"7d\", or seconds), "
                         f"or None (once per evaluator version), got {value!r:.40}")
    return value


class JudgeHealth:
    """One evaluator's health checks: when they fall due (`poke`, on the hook path), and the check."""

    def __init__(self, shell: HookShell) -> None:
        self.shell = shell
        self._lock = threading.Lock()
        self._due_at = 0.0  # monotonic; 0: look in the store on the first live run
        self._version: str | None = None

    @property
    def every_s(self) -> float | None:
        every = self.shell.settings.health_every
        return parse_duration(every) if isinstance(every, str) else every

    def poke(self) -> None:
        """A live run: start a check in the background when one is due (a new version, or the time
        `health_every` set). Costs a clock read otherwise."""
        version = self.shell.evaluator.evaluator_version
        if time.monotonic() < self._due_at and version == self._version:
            return
        with self._lock:
            if time.monotonic() < self._due_at and version == self._version:
                return
            self._version, self._due_at = version, math.inf  # one check at a time
        runtime.submit(self._when_due, version)

    async def _when_due(self, version: str | None) -> None:
        every = self.every_s
        try:
            last = await self._last(version)
            now = datetime.now(UTC)
            if last is not None and (every is None or (now - last.created_at).total_seconds() < every):
                wait = math.inf if every is None else every - (now - last.created_at).total_seconds()
            else:
                slot = "first" if every is None else str(int(time.time() // every))
                await self.check(slot=slot)
                wait = math.inf if every is None else every
        except Exception as exc:  # the store or the judge is down: try again later, never on every run
            log.warning("judge_health_check_failed", evaluator=self.name, error_type=type(exc).__name__,
                        error=str(exc)[:300])
            wait = min(every or RETRY_S, RETRY_S)
        self._due_at = time.monotonic() + wait

    @property
    def name(self) -> str:
        return f"{self.shell.evaluator.evaluator_name}{SUFFIX}"

    async def _last(self, version: str | None) -> EvalRecord | None:
        found = await self.shell.wiring.store.query(evaluator=self.name, limit=200)
        return next((r for r in found if r.evaluator_version == version and r.status != "error"), None)

    async def check(self, *, slot: str | None = None) -> EvalRecord:
        """Grade the golden set and the canaries now; store and deliver the health record, and return it."""
        settings, wiring, evaluator = self.shell.settings, self.shell.wiring, self.shell.evaluator
        golden: CaseSet | None = settings.golden
        canaries: CaseSet | None = settings.canaries
        if golden is None and canaries is None:
            raise ValueError(f"evaluator {evaluator.evaluator_name!r} has no golden= or canaries= to check its "
                             "health by")
        version = evaluator.evaluator_version
        cases = [*(golden.cases if golden else ()), *(canaries.cases if canaries else ())]
        started = time.perf_counter()
        graded = await _grade(self.shell, cases)
        earlier = [r for r in await wiring.store.query(evaluator=self.name, limit=200)
                   if r.evaluator_version != version and r.status != "error"]
        record = _record(self.name, version, slot or uuid.uuid4().hex, evaluator.evaluator_name,
                         golden, canaries, graded, settings.golden_min_kappa, earlier[0] if earlier else None,
                         (time.perf_counter() - started) * 1000)
        error = await wiring.pipeline.deliver([record])
        if error is not None:
            raise error
        return record


async def _grade(shell: HookShell, cases: Sequence[HealthCase]) -> list[EvalRecord]:
    """Each case graded by the evaluator's offline pipeline (redacted as live runs are; nothing stored,
    nothing routed to review), at most `max_concurrency` at once; in case order."""
    settings, pipeline = shell.settings, shell.wiring.offline
    batch = f"health:{uuid.uuid4().hex}"
    contexts = [EvalContext(input=c.input, output=c.output, expected=c.expected, run_id=f"{batch}:{i}", case_index=i,
                            metadata={"health_case": c.id}) for i, c in enumerate(cases)]
    if settings.redact is not None:
        contexts = [redact_context(ctx, settings.redact) for ctx in contexts]
    found: list[EvalRecord | None] = [None] * len(contexts)
    limit = anyio.Semaphore(settings.max_concurrency)

    async def one(i: int, ctx: EvalContext) -> None:
        async with limit:
            found[i] = await pipeline.grade(ctx)

    async with anyio.create_task_group() as tg:
        for i, ctx in enumerate(contexts):
            tg.start_soon(one, i, ctx)
    return [r for r in found if r is not None]


def _record(name: str, version: str | None, slot: str, of: str, golden: CaseSet | None, canaries: CaseSet | None,
            graded: list[EvalRecord], min_kappa: float, previous: EvalRecord | None, latency_ms: float) -> EvalRecord:
    """The one health record of a check."""
    n_golden = len(golden.cases) if golden else 0
    pairs, errors, caught, missed = [], 0, 0, []
    every = [*(golden.cases if golden else ()), *(canaries.cases if canaries else ())]
    for i, (record, case) in enumerate(zip(graded, every, strict=True)):
        if record.passed is None:
            errors += 1
        elif i < n_golden:
            pairs.append((record.passed, case.passed))
        elif record.passed:
            missed.append(case.id)
        else:
            caught += 1
    confusion = Confusion.of(pairs)
    kappa, agreement = confusion.kappa, confusion.accuracy
    n_canaries = len(graded) - n_golden
    judged_canaries = caught + len(missed)
    details: dict[str, Any] = {
        "golden": {"source": golden.source if golden else None, "cases": n_golden, "graded": len(pairs),
                   "kappa": None if kappa is None else round(kappa, 4),
                   "agreement": None if agreement is None else round(agreement, 4),
                   "confusion": {"tp": confusion.tp, "fp": confusion.fp, "fn": confusion.fn, "tn": confusion.tn}},
        "canaries": {"source": canaries.source if canaries else None, "cases": n_canaries, "caught": caught,
                     "passed": missed, "catch_rate": round(caught / judged_canaries, 4) if judged_canaries else None},
        "errors": errors, "min_kappa": min_kappa}
    before = previous.details.get("golden", {}).get("kappa") if previous is not None else None
    if previous is not None:
        details["previous"] = {"version": previous.evaluator_version, "kappa": before,
                               "change": None if before is None or kappa is None else round(kappa - before, 4)}
    problems = []
    if golden is not None and pairs:
        if kappa is not None and kappa < min_kappa:  # None: every label and verdict alike, all agreeing
            problems.append(f"kappa {kappa:.2f} is below golden_min_kappa {min_kappa:g}")
    if missed:
        problems.append(f"{len(missed)} of {judged_canaries} canaries passed: {', '.join(missed[:5])}")
    status = "error" if not pairs and not judged_canaries else "failed" if problems else "passed"
    summary = [f"kappa {kappa:.2f} (min {min_kappa:g}) over {len(pairs)} golden cases" if kappa is not None
               else f"kappa undefined over {len(pairs)} golden cases (every label and verdict alike)"
               if pairs else "no golden case graded" if golden else "no golden set",
               f"{caught} of {judged_canaries} canaries caught" if canaries else "no canaries"]
    if details.get("previous", {}).get("change") is not None:
        summary.append(f"change from version {previous.evaluator_version}: {details['previous']['change']:+.2f}")  # type: ignore[union-attr]
    if errors:
        summary.append(f"{errors} case(s) not graded (judge errors)")
    reason = ("; ".join(problems) + " (" + "; ".join(summary) + ")") if problems else "; ".join(summary)
    usage = [r for r in graded if r.cost_usd is not None]
    fields: dict[str, Any] = {
        "id": record_id(name, f"health:{slot}", version=version), "evaluator": name, "evaluator_version": version,
        "mode": "numeric", "threshold": min_kappa, "status": status, "scope": "health",
        "score": None if status == "error" or kappa is None else round(kappa, 4),
        "passed": None if status == "error" else status == "passed",
        "reason": reason if status != "error" else None,
        "input": f"health check of {of}: golden {golden.source if golden else '-'}, "
                 f"canaries {canaries.source if canaries else '-'}",
        "output": "; ".join(summary), "details": details, "metadata": {"health_of": of},
        "judge_model": next((r.judge_model for r in graded if r.judge_model), None),
        "latency_ms": round(latency_ms, 3), "cost_usd": sum(r.cost_usd for r in usage) if usage else None,
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in graded) or None,
        "completion_tokens": sum(r.completion_tokens or 0 for r in graded) or None,
        "attempts": sum(r.attempts for r in graded),
    }
    if status == "error":
        first = next((r for r in graded if r.status != "passed" and r.error_type), None)
        fields["error_type"] = "JudgeHealthError"
        fields["error_message"] = (f"no case of the health check was graded ({errors} errors"
                                   + (f"; the first: {first.error_type}: {first.error_message}" if first else "")
                                   + ")")[:2000]
    return new_record(fields)
