"""Deployment: the settings every evaluator takes for how it is deployed, each defined once.

A setting's definition is one field of `Deployment`: its type, its default, its check, when an
assignment can still change it, whether a job's spec carries it, and its docstring (pydantic_evals'
`OnlineEvaluator` keeps its online settings the same way, apart from the evaluator). Where a setting
acts is elsewhere: `HookSettings.build` (the store, caps, pace and queue), the hook shell (sampling,
redaction, gates, printing), the pipeline (callbacks). The job spec's ``deployment`` has one encoder
(`job_spec`) and one decoder (`decode_deployment`), both read from the definitions.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from .._base.callbacks import wrap_callback
from .._base.context import EvalContext
from .._base.record import EvalRecord
from .._base.sqlitefile import checked_path
from .._base.urls import redact, spec_without_credentials
from .._base.validate import check_choice, check_number
from .._grading.budget import DEFAULT_MAX_QUEUE_BYTES
from .._grading.redis import check_url, require_extra
from .._grading.spend import PERIODS
from .._grading.work import OVERLOAD_POLICIES
from ..stores import AgnoDbStore, Store
from ..stores._url import store_from_url
from .gate import DEFAULT_FALLBACK, GATE_ON_ERROR
from .health import check_every, read_set
from .sampling import Sampler, SampleRate

Callback = Callable[[EvalRecord], Any]
PathSetting = str | os.PathLike[str] | bool | None


Check = Callable[[str, Any], Any]
#: when an assignment (`Evaluator.configure`) can still take effect: "live" settings are read per run;
#: "dispatch" ones only by a background dispatcher, until one runs; "build" ones decide what is built
#: (the store, the pipeline's caps and pace, the dispatcher), until it is
Changes = Literal["live", "dispatch", "build"]


def setting(default: Any, check: Check | None = None, *, changes: Changes = "build", travels: bool = False,
            machine: bool = False) -> Any:
    """One deployment setting's definition, with its type and docstring beside it: its default;
    `check(name, value)`, which refuses a bad value naming it and returns the value kept; when it can
    change (`Changes`); whether a job's spec carries it (`travels`: how the job is capped and paced,
    so an evaluator rebuilt from the spec grades under it); and whether it names something on this
    machine (`machine`: a file path, never taken from a job that came from elsewhere)."""
    return field(default=default, repr=False,
                 metadata={"check": check, "changes": changes, "travels": travels, "machine": machine})


# ---- the checks settings name (each error names the setting and what is allowed) -------------------


def _number(**bounds: Any) -> Check:
    def check(name: str, value: Any) -> Any:
        check_number(name, value, **bounds)
        return value
    return check


def _optional(inner: Check) -> Check:
    return lambda name, value: None if value is None else inner(name, value)


def _choice(allowed: Iterable[str]) -> Check:
    def check(name: str, value: Any) -> Any:
        check_choice(name, value, tuple(allowed))
        return value
    return check


def _callback(name: str, value: Any) -> Any:
    wrap_callback(name, value)  # a callback that is not callable fails here
    return value


def _store(name: str, value: Any) -> Any:
    if isinstance(value, str):
        value = _store_named(value)
    if value is not None and not (hasattr(value, "write") and hasattr(value, "query")):
        raise TypeError(f"store must implement judgehooks.stores.Store (write, query), got {type(value).__name__}")
    return value


def _agno_db(name: str, value: Any) -> Any:
    if value is not None:
        AgnoDbStore(value)  # refuses, by name, a db that cannot hold agno eval runs
    return value


def _sample_rate(name: str, value: Any) -> Any:
    Sampler.validate(value, None)
    return value


def _when(name: str, value: Any) -> Any:
    Sampler.validate(1.0, value)
    return value


def _file_or_flag(meaning: str) -> Check:
    def check(name: str, value: Any) -> Any:
        if value is not None and not isinstance(value, (bool, str, os.PathLike)):
            raise TypeError(f"{name} must be {meaning}, got {type(value).__name__}")
        return value
    return check


def _broker(name: str, value: Any) -> Any:
    if value is not None:
        check_url(value, name)
        require_extra(name)
    return value


def _flag(name: str, value: Any) -> Any:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _fallback(name: str, value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"fallback must be a non-empty string shown instead of a failed answer, got {value!r}")
    return value


def _repair(name: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"repair must be an integer >= 0 (re-runs before the gate blocks), got {value!r}")
    return value


def _gate_choice(what: str) -> Check:
    def check(name: str, value: Any) -> Any:
        if value not in GATE_ON_ERROR:
            raise ValueError(f"{name} must be one of {', '.join(map(repr, GATE_ON_ERROR))} (what a gate does "
                             f"when {what}), got {value!r}")
        return value
    return check


def _redact(name: str, value: Any) -> Any:
    if value is not None and not callable(value):
        raise TypeError(f"redact must be a function from text to text (e.g. judgehooks.redact.PII), "
                        f"got {type(value).__name__}")
    return value


def _budget(name: str, value: Any) -> Any:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"budget must be a non-empty name shared by the evaluators that spend it, got {value!r}")
    return value


def _ledger(name: str, value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise TypeError(f"spend_ledger must be the path of a SQLite file that the processes sharing the caps "
                        f"name, got {value!r}")
    checked_path(value, "spend_ledger")  # else every call would be admitted uncounted: the caps off
    return value


@dataclass(kw_only=True)
class Deployment:
    """How an evaluator is deployed, apart from what it grades: the keywords every evaluator takes,
    each defined here once (type, default, check, docstring). Every evaluator inherits them as
    keyword-only fields, so its constructor, `inspect.signature` and type checkers take them natively,
    and keeps them in its `HookSettings`: these, validated; `Evaluator.configure` changes them."""

    store: Store | str | None = setting(None, _store)
    """Where records go: a `Store`, or a URL or path (`judgehooks.stores.store_from_url`); None: the
    default store ($JUDGEHOOKS_DB, else ./judgehooks.db; with `db=` alone, the agno db only), checked
    at construction with the rules between settings (it depends on `db`)."""
    db: Any = setting(None, _agno_db)
    """An agno db: records also go to its eval table, where AgentOS shows them."""
    on_fail: Callback | None = setting(None, _callback, changes="live")
    """Called with every `failed` record, sync or async."""
    on_error: Callback | None = setting(None, _callback, changes="live")
    """Called with every `error` record (the judge could not be reached or read)."""
    on_record: Callback | None = setting(None, _callback, changes="live")
    """Called with every record, whatever its status."""
    on_drop: Callback | None = setting(None, _callback, changes="live")
    """Called with every `skipped` record a full queue or a spend cap made."""
    run_in_background: bool = setting(False)
    """Hand each run to the durable background queue instead of grading it before the run returns."""
    sample_rate: SampleRate = setting(1.0, _sample_rate, changes="live")
    """The share of runs graded, 0 to 1, or a function of the run's `EvalContext` giving it."""
    when: Callable[[EvalContext], bool] | None = setting(None, _when, changes="live")
    """Grade only the runs for which this function of the `EvalContext` is true."""
    max_concurrency: int = setting(32, _number(minimum=1, integer=True), changes="dispatch")
    """Judge calls at once: offline batches and the background queue."""
    max_queue: int = setting(10_000, _number(minimum=1, integer=True), changes="dispatch")
    """Jobs the background queue holds; beyond it, `overload` decides."""
    max_queue_bytes: int = setting(DEFAULT_MAX_QUEUE_BYTES, _number(minimum=1, integer=True))
    """Bytes of queued jobs; beyond them a job is shed as a `skipped` record. It bounds a
    `SessionJudge`'s book too: a larger turn is its run's `skipped` record, a session whose turns
    reach it is graded at once, and a claim of due sessions reads about that many bytes at most."""
    overload: str = setting("drop_newest", _choice(OVERLOAD_POLICIES), changes="dispatch")
    """What a full queue does: shed at once by default, so a hanging judge never stalls the runs."""
    block_timeout: float = setting(5.0, _number(minimum=0), changes="dispatch")
    """Seconds a run waits for room in a full queue with ``overload="block"``."""
    outbox: PathSetting = setting(None, _file_or_flag("a path, True/None (next to the store) or False (no outbox)"))
    """The file that holds pending jobs: a path; None or True: beside the store; False: none."""
    spill: PathSetting = setting(None, _file_or_flag(
        "a path, True (in the outbox file), False (off) or None (on for stores that are not local files)"))
    """Where records wait while the store is down: a path, True (the outbox file), False (nowhere);
    None: on for stores that are not local files."""
    requests_per_minute: float | None = setting(None, _optional(_number(minimum=0, allow_equal=False)),
                                                travels=True)
    """Pace the judge calls (retries included): each waits until 60/rpm s after its model's last call."""
    broker: str | None = setting(None, _broker)
    """A Redis URL: `judgehooks worker` processes grade the jobs (with ``run_in_background=True``)."""
    gate: bool = setting(False, _flag, changes="live")
    """Block a failed answer, showing `fallback` instead (inline grading only)."""
    fallback: str = setting(DEFAULT_FALLBACK, _fallback, changes="live")
    """What a gate shows instead of a blocked answer."""
    repair: int = setting(0, _repair, changes="live")
    """Re-run the agent up to this many times, with the judge's reason, before the gate blocks."""
    gate_on_error: str = setting("block", _gate_choice("the judge gives no verdict"), changes="live")
    """A gate with no verdict (a judge error): "block" shows the fallback, "allow" the answer."""
    gate_on_skip: str = setting("block", _gate_choice(
        "the evaluation was skipped: a spend cap reached or a shed job"), changes="live")
    """A gate over a spend cap or with a shed job (a `skipped` record): as `gate_on_error`."""
    gate_latency_s: float | None = setting(None, _optional(_number(minimum=0, allow_equal=False)), changes="live")
    """Seconds a gate waits for the verdict on a run; past them the grading is cancelled, a `skipped`
    record (reason "gate_latency") is stored, and `gate_on_timeout` decides. None: no limit."""
    gate_on_timeout: str = setting("block", _gate_choice("it has no verdict within gate_latency_s"), changes="live")
    """A gate with no verdict within `gate_latency_s`: "block" shows the fallback, "allow" the answer."""
    print_summary: bool = setting(False, changes="live")
    """Print agno's summary table after each run graded inline, and for offline batches."""
    print_results: bool = setting(False, changes="live")
    """Print agno's results table after each run graded inline, and for offline batches."""
    file_path_to_save_results: str | None = setting(None, changes="live")
    """Offline results as JSON; ``{name}`` and ``{run_id}`` are filled in as safe file names."""
    redact: Callable[[str], str] | None = setting(None, _redact, changes="live")
    """Text to text, applied to the run's text before anything leaves the process (`judgehooks.redact`)."""
    max_cost_usd: float | None = setting(None, _optional(_number(minimum=0, allow_equal=False)), travels=True)
    """Judge spend per window `per`; over it a run gets a `skipped` record, reason "budget"."""
    max_calls: int | None = setting(None, _optional(_number(minimum=1, integer=True)), travels=True)
    """Judge calls per window `per`; over it a run gets a `skipped` record, reason "budget"."""
    per: str = setting("hour", _choice(PERIODS), travels=True)
    """The caps' window: "minute", "hour" or "day" (fixed, in UTC)."""
    budget: str | None = setting(None, _budget, travels=True)
    """A name: the evaluators naming the same budget share its counts (per judge model)."""
    spend_ledger: str | os.PathLike[str] | None = setting(None, _ledger, travels=True, machine=True)
    """A SQLite file holding the caps' counts, shared by the processes on this machine that name it."""
    review_margin: float | None = setting(None, _optional(_number(minimum=0)), changes="build", travels=True)
    """Route a live verdict to the review queue when its numeric score is within this many points of
    the threshold (jurors that disagree are always routed)."""
    review_sample_rate: float = setting(0.0, _number(minimum=0, maximum=1), changes="build", travels=True)
    """The share of live verdicts routed to the review queue as a random audit, 0 to 1."""
    golden: Any = setting(None, read_set, changes="live")
    """Labelled cases the judge is checked against (a JSONL file as `judgehooks export --labelled`
    writes, or a list of dicts with input, output and passed): its health check's Cohen's kappa."""
    canaries: Any = setting(None, read_set, changes="live")
    """Answers planted to be wrong (a JSONL file or a list of dicts with input and output): each
    must fail the judge's health check."""
    golden_min_kappa: float = setting(0.6, _number(minimum=-1, maximum=1), changes="live")
    """A health check whose kappa against the golden labels is below this fails: an alert (`on_fail`)."""
    health_every: str | float | None = setting(None, check_every, changes="live")
    """How often the health check runs again ("24h", or seconds); None: once per evaluator version."""


#: every deployment setting's field, by name
SETTINGS = {f.name: f for f in dataclasses.fields(Deployment)}


# ---- the job spec's `deployment`: one encoder, one decoder --------------------------------------------


def job_spec(spec: Mapping[str, Any] | None, settings: Deployment) -> dict[str, Any] | None:
    """The one encoder: the spec jobs carry (outbox rows, session turns, Redis), the evaluator's own
    (no credentials) and, under ``deployment``, the settings that travel and are not at their default,
    as JSON data; so an evaluator rebuilt from it (`judgehooks resume`, `judgehooks worker --rebuild`)
    grades under the caps and pace of the process that queued the job."""
    clean = spec_without_credentials(spec)
    if clean is None:
        return None
    clean.pop("deployment", None)
    found = {name: os.fspath(value) if isinstance(value, os.PathLike) else value
             for name, definition in SETTINGS.items() if definition.metadata["travels"]
             and (value := getattr(settings, name)) != definition.default}
    if found:
        clean["deployment"] = found
    return clean


def decode_deployment(data: Any, *, same_machine: bool) -> dict[str, Any]:
    """The one decoder: the keywords a job's ``deployment`` gives the evaluator rebuilt from it. Only
    settings that travel; one that names something on a machine (`machine`: `spend_ledger`) only on
    the machine that queued the job (`judgehooks resume`), never from a job that came from elsewhere
    (a Redis worker: a job never names a file there)."""
    if not isinstance(data, Mapping):
        return {}
    return {name: value for name, value in data.items() if name in SETTINGS and SETTINGS[name].metadata["travels"]
            and (same_machine or not SETTINGS[name].metadata["machine"])}


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
    gate_latency_s: float | None
    gate_on_timeout: str
    redact: Callable[[str], str] | None
    max_cost_usd: float | None
    max_calls: int | None
    per: str
    budget: str | None
    spend_ledger: str | os.PathLike[str] | None
    review_margin: float | None
    review_sample_rate: float
    golden: Any
    canaries: Any
    golden_min_kappa: float
    health_every: str | float | None


class DeploymentKeywords(OwnKeywords, total=False):
    """Every deployment keyword: `OwnKeywords` and those agno's `AgentAsJudgeEval` names in its own
    signature (a hand-written ``__init__(self, ..., **hook: Unpack[DeploymentKeywords])``)."""

    db: Any
    on_fail: Callback | None
    run_in_background: bool
    print_summary: bool
    print_results: bool
    file_path_to_save_results: str | None


def _store_named(url: str) -> Store:
    """store="postgresql://...", "sqlite:///evals.db" or a path, read by `store_from_url`."""
    try:
        store: Store = store_from_url(url)
    except (ValueError, ImportError) as exc:
        raise type(exc)(f"store={redact(url)!r}: {exc} (a store given as a string is read by "
                        "judgehooks.stores.store_from_url)") from exc
    return store
