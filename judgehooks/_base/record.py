"""EvalRecord: the one stored outcome of one evaluation, and the pure functions that build it."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, field_validator, model_validator
from pydantic.dataclasses import dataclass
from pydantic_core import ArgsKwargs

from .secrets import scrub, scrub_errors
from .text import lazy_pattern, storable_data, storable_values

Status = Literal["passed", "failed", "error", "skipped"]
Mode = Literal["binary", "numeric"]
#: what a judge is asked for: a record's mode, which of two answers is better (a `Shadow`'s comparison),
#: or a short name for what a group of failure reasons share (the web app's failure modes)
JudgeMode = Literal["binary", "numeric", "pairwise", "name"]
#: what a record grades: one run, a session's turns, or (a judge health check) the judge itself
Scope = Literal["run", "session", "health"]
STATUSES: tuple[str, ...] = ("passed", "failed", "error", "skipped")

# Fixed namespace: record ids must be the same in every process that grades the same run.
_NAMESPACE = uuid.UUID("6f1c7a52-3d0e-4f55-9a8c-1b1f0c2e9d41")
_NAMESPACE_BYTES = _NAMESPACE.bytes


def record_id(evaluator: str, run_id: str, case_index: int | None = None, *, version: str | None = None) -> str:
    """Deterministic id: the same judged run and evaluator always give the same id, so re-delivery,
    resume and re-grading store one record. The evaluator's `version` is part of it: two evaluators
    with one name that differ in anything deciding a verdict (another judge model, rubric, redactor
    setting...) keep a record each. Without a version (an evaluator that has none), the id is the
    one given before versions were part of it."""
    key = f"{evaluator}\x1f{run_id}" if case_index is None else f"{evaluator}\x1f{run_id}\x1f{case_index}"
    return _uuid5(key if version is None else f"{key}\x1e{version}")


@functools.lru_cache(maxsize=4096)
def _uuid5(name: str) -> str:
    """``str(uuid.uuid5(_NAMESPACE, name))`` without building a UUID object (a third of the time).
    A background evaluation asks for its id twice, on the hook path and when its record is made:
    the recent ids are kept, so the second ask is a lookup (4,096 of them: about 1 MB)."""
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + name.encode(), usedforsecurity=False).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def split_model(judge_model: str) -> tuple[str, str]:
    """A record's ``judge_model`` as (provider, model id): ``openrouter/meta-llama/llama-3`` is
    provider ``openrouter``, model ``meta-llama/llama-3``; a bare id has no provider."""
    provider, _, model_id = judge_model.partition("/")
    return (provider, model_id) if model_id else ("", provider)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True, config=ConfigDict(extra="forbid", defer_build=True))
class EvalRecord:
    """One evaluation's outcome. ``status`` is one of passed, failed, error, skipped.

    A judge outage or an unreadable reply is ``error`` (with ``error_type`` / ``error_message``),
    never ``failed``; ``passed`` is None unless a verdict was reached.

    A validated dataclass: it has agno's ``AgentAsJudgeEvaluation`` attributes (``input``,
    ``output``, ``criteria``, ``score``, ``reason``, ``passed``), ``dataclasses.asdict(record)``
    and ``print_eval()`` work on it as on agno's, and every judgehooks field rides along. The
    pydantic methods ``model_dump``, ``model_dump_json``, ``model_validate`` and
    ``model_validate_json`` read and write it as JSON data.
    """

    id: str
    created_at: datetime = Field(default_factory=utcnow)
    status: Status
    evaluator: str
    evaluator_version: str | None = None  # hash of what decides the verdict; None on records from before it
    mode: Mode
    threshold: int | float | None = None  # an LLM judge's is a number 1-10; a check's may be any number
    score: int | float | None = None  # an LLM judge's numeric score is an int, as in agno
    passed: bool | None = None
    reason: str | None = None
    criteria: str | None = None  # what an LLM judge was asked to hold the output to
    agent_id: str | None = None
    agent_name: str | None = None
    team_id: str | None = None
    team_name: str | None = None
    run_id: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    trace_id: str | None = None  # the judged run's OpenTelemetry trace and span (hex), when one was current
    span_id: str | None = None
    input: str = ""
    output: str = ""
    judge_model: str | None = None
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    attempts: int = 0
    sample_rate: float = 1.0  # the probability this run was sampled with: weight pass rates by 1/sample_rate
    error_type: str | None = None
    error_message: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # What the evaluator saw beyond score and reason: per criterion, per check, per sample.
    details: dict[str, Any] = Field(default_factory=dict)
    redacted_by: str | None = None  # the redactor the run's text went through before anything saw it
    # What was graded: one run, or a session's turns (`run_ids`, in order; `SessionJudge`).
    scope: Scope = "run"
    run_ids: list[str] = Field(default_factory=list)

    @field_validator("scope", "run_ids", mode="before")
    @classmethod
    def _stored_default(cls, value: Any, info: Any) -> Any:
        """Rows written before these fields existed hold NULL; a store keeps run_ids as JSON text."""
        if value is None or value == {}:
            return "run" if info.field_name == "scope" else []
        return json.loads(value) if info.field_name == "run_ids" and isinstance(value, str) else value
    # Set only by `judgehooks consistency`: the id of the record this one re-judges. Such records
    # measure the judge and never count in a pass rate.
    rejudge_of: str | None = None
    # The judged run's own figures, from agno's `run_output.metrics` when its post hooks started
    # (`RunUsage`): its latency so far, tokens and cost. None when agno reported none (offline grades).
    run_latency_ms: float | None = None
    run_input_tokens: int | None = None
    run_output_tokens: int | None = None
    run_cost_usd: float | None = None
    # Why this live verdict went to people (`review_margin`, `review_sample_rate`, jurors that
    # disagree: `_grading.routing`); None when it was not routed. The review queues take these first.
    review_reason: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _before(cls, data: Any) -> Any:
        """Every string a store will write is UTF-8-encodable (a lone surrogate becomes U+FFFD), also
        the ones no snapshot cleaned: a judge's reason, an error message, metadata, details. And rows
        written before `criteria` was a field kept it in the metadata. No credential survives in an
        error message or the errors in the details (`secrets.scrub`): an error body may quote the key."""
        if isinstance(data, ArgsKwargs):  # constructed: EvalRecord(id=..., ...)
            kwargs = data.kwargs
            if not kwargs:
                return data
            # field names need no walk (any other key is refused as an extra field, unstored)
            clean = storable_values(kwargs) if kwargs.keys() <= _FIELD_NAMES else storable_data(kwargs)
            return ArgsKwargs(data.args, _scrubbed(clean))
        if not isinstance(data, dict):
            return data
        data = _scrubbed(storable_data(data))
        if data.get("criteria") is None:
            found = (data.get("metadata") or {}).get("criteria") if isinstance(data.get("metadata"), dict) else None
            if isinstance(found, str):
                return {**data, "criteria": found}
        return data

    # ---- pydantic's methods, for JSON in and out ------------------------------------------------

    def model_dump(self, *, mode: Literal["python", "json"] = "python", **options: Any) -> dict[str, Any]:
        """The record as a dict; `options` as pydantic's (include, exclude, exclude_none, ...)."""
        return _adapter().dump_python(self, mode=mode, **options)  # type: ignore[no-any-return]

    def model_dump_json(self, **options: Any) -> str:
        """The record as JSON text; `options` as pydantic's (indent, include, exclude, ...)."""
        return _adapter().dump_json(self, **options).decode()

    @classmethod
    def model_validate(cls, data: Mapping[str, Any]) -> EvalRecord:
        return _adapter().validate_python(data)

    @classmethod
    def model_validate_json(cls, data: str | bytes) -> EvalRecord:
        return _adapter().validate_json(data)

    def print_eval(self, console: Any = None) -> None:
        """Print this evaluation as agno's `AgentAsJudgeEvaluation.print_eval` does, with the
        status (error and skipped included) and the error when there is one."""
        score = None if self.score is None else f"{self.score:g}/10" if self.mode == "numeric" else f"{self.score:g}"
        print_evaluation(console, input=self.input, output=self.output, score=score, status=self.status,
                         reason=self.reason or None,
                         error=f"{self.error_type}: {self.error_message or ''}" if self.error_type else None)


# What could steer a terminal (C0 but newline, DEL, C1, bidi marks and overrides, line separators), shown
# as `\uXXXX`: the run's text and the judge's reason reach the terminal here (`print_results=True`).
_STEERING = lazy_pattern("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _inert(text: str) -> str:
    return _STEERING.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def print_evaluation(console: Any, *, input: str, output: str, score: str | None, status: str,
                     reason: str | None, error: str | None = None) -> None:
    """agno's evaluation table: input and output clipped to 200 characters, then the rows given."""
    from rich.box import ROUNDED
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.table import Table
    from rich.text import Text

    def clip(text: str) -> str:
        return _inert(text[:200] + "..." if len(text) > 200 else text)

    table = Table(box=ROUNDED, border_style="blue", show_header=False, title="[ Agent As Judge Evaluation ]",
                  title_style="bold sky_blue1", title_justify="center")
    table.add_row("Input", Text(clip(input)))
    table.add_row("Output", Text(clip(output)))
    if score is not None:
        table.add_row("Score", score)
    table.add_row("Status", Text(status.upper(), style={"passed": "green", "failed": "red"}.get(status, "yellow")))
    if reason is not None:
        table.add_row("Reason", Markdown(_inert(reason)))
    if error:
        table.add_row("Error", Text(_inert(error)))
    (console or Console()).print(table)


def _scrubbed(data: dict[str, Any]) -> dict[str, Any]:
    """The record's data with credentials masked where errors are written (the ONE place: every record,
    every path, its event and its callbacks see the masked text)."""
    message, details = data.get("error_message"), data.get("details")
    clean = {}
    if isinstance(message, str) and (masked := scrub(message)) != message:
        clean["error_message"] = masked
    if details and (masked_details := scrub_errors(details)) is not details:
        clean["details"] = masked_details
    return {**data, **clean} if clean else data


def new_record(fields: dict[str, Any]) -> EvalRecord:
    """``EvalRecord(**fields)``: the same validation by the class's own validator (`_before`
    included), without the copy of `fields` into keywords and pydantic's per-instance ``__init__``
    (a fifth of a record's cost: every evaluation builds one)."""
    return EvalRecord.__pydantic_validator__.validate_python(ArgsKwargs((), fields))  # type: ignore[attr-defined,no-any-return]


@functools.cache
def _adapter() -> TypeAdapter[EvalRecord]:
    """The record's pydantic adapter, built on first use: building its validator costs several
    milliseconds of import time that a process which never reads a record back does not need."""
    return TypeAdapter(EvalRecord)


# Column order of a record in stores; every field is one column.
FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(EvalRecord))
_FIELD_NAMES = frozenset(FIELDS)
