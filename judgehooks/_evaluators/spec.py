"""Rebuild an evaluator in another process from the spec its jobs carry (`judgehooks resume`, workers).

The classes a spec may name are the built-in evaluator classes, registered as they are defined
(`Evaluator.__init_subclass__`): a spec can never name an arbitrary importable object, and this
module never imports the package face. The package face loads its modules on first use, so the
modules that define built-in evaluators are imported here before the registry is read.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any

from .._hooks.deployment import decode_deployment
from ..exceptions import NotRebuildable

_classes: dict[str, type[Any]] = {}

#: The modules of this folder that define evaluator classes a spec may name.
_BUILTIN_MODULES = ("checks", "combine", "function", "llm", "rubric", "scorer", "session")


def _registered() -> dict[str, type[Any]]:
    """The registry, with every built-in evaluator module imported (each import is a no-op after the first)."""
    for module in _BUILTIN_MODULES:
        importlib.import_module(f"{__package__}.{module}")
    return _classes

#: How an LLM evaluator reaches and retries its judge (`llm.JudgeConnection`'s fields but
#: include_tool_calls, plus AgentAsJudgeEval's own): a worker never takes these from a job.
CONNECTION = frozenset({"model", "judge", "api_base", "api_key", "timeout", "retries", "retry_backoff", "temperature",
                        "structured_output", "litellm_kwargs", "judge_process", "judge_processes", "evaluator_agent"})


def register(cls: type[Any]) -> None:
    """Called for every Evaluator subclass; only judgehooks' own classes can be rebuilt from a spec."""
    if cls.__module__.startswith("judgehooks.") and not cls.__name__.startswith("_"):
        _classes[cls.__name__] = cls


def rebuild(spec: dict[str, Any] | None, *, same_machine: bool = True, **hook: Any) -> Any:
    """An evaluator from the spec its process stored with its jobs: AgentAsJudgeEval settings, or
    {"class": <a judgehooks evaluator>, "settings": {...}}. Evaluators made from user code (functions,
    pydantic models, composites, custom judges) store no spec: they need --import (NotRebuildable).
    Background grading unless `hook` says otherwise (a worker grades in the foreground). The spec's
    `deployment` (the spend caps and rate its process graded under: `decode_deployment`, a file path
    only on the machine that queued the job) applies to the rebuilt evaluator too, unless `hook`
    names one of them."""
    if spec is None:
        raise NotRebuildable("it was built from user code (a function, a model, a composite or a custom judge)")
    if not isinstance(spec, dict) or not isinstance(spec.get("settings") or {}, dict):
        raise NotRebuildable(f"its stored spec is not a JSON object of settings: {spec!r:.80}")
    spec = dict(spec)
    hook = {**decode_deployment(spec.pop("deployment", None), same_machine=same_machine), **hook}
    settings = dict(spec.get("settings") or {}) if "class" in spec else dict(spec)
    if "class" in spec:
        cls = _registered().get(spec["class"]) if isinstance(spec["class"], str) else None
        if cls is None:
            raise NotRebuildable(f"its spec names {spec['class']!r}, which is not a judgehooks evaluator")
    else:
        cls = _registered()["AgentAsJudgeEval"]
        if not spec.get("model"):
            raise NotRebuildable("its judge is not a litellm model string")
    settings = {k: v for k, v in settings.items() if v is not None}
    return cls(**settings, **{"run_in_background": True, **hook})


def rebuildable() -> tuple[str, ...]:
    """The names of the classes a spec may name."""
    return tuple(sorted(_registered()))


def takes_judge(name: str) -> bool:
    """Whether the evaluator class `name` grades with an LLM judge (it takes an `api_base`)."""
    return "api_base" in inspect.signature(_registered()[name]).parameters


@dataclass(frozen=True)
class JobRebuild:
    """How a worker that opts in (``judgehooks worker --rebuild``) builds an evaluator from a job's spec.

    A job is data anyone with write access to Redis may have written (sign jobs to prevent that), so
    it may choose only WHAT is graded: the criteria, threshold, a check's pattern, among the classes
    in `allow`. HOW the judge is reached (model, api_base, keys, timeouts, retries) comes from the
    worker: `model` and `api_base` here, litellm's provider variables for keys. A job therefore can
    never send the worker's provider key to a server of its choosing.
    """

    allow: frozenset[str]
    model: str | None = None
    api_base: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.allow) - set(_registered()))
        if unknown:
            raise ValueError(f"cannot rebuild {', '.join(unknown)}: not judgehooks evaluator classes "
                             f"(choose from {', '.join(rebuildable())})")
        if self.model is None and any(takes_judge(name) for name in self.allow):
            raise ValueError(f"rebuilding {', '.join(sorted(n for n in self.allow if takes_judge(n)))} needs this "
                             f"worker's own judge model (--judge-model or $JUDGEHOOKS_MODEL): a job never chooses it")

    def __call__(self, spec: dict[str, Any] | None, **hook: Any) -> Any:
        if not isinstance(spec, dict):
            return rebuild(None, **hook)
        spec = dict(spec)
        # The job's caps and rate hold (counted in Redis for the fleet); never a file path on this worker.
        hook = {**decode_deployment(spec.pop("deployment", None), same_machine=False), **hook}
        name = spec.get("class", "AgentAsJudgeEval")
        if not isinstance(name, str) or name not in self.allow:
            raise NotRebuildable(f"its spec names {name!r}, which this worker does not rebuild (it rebuilds "
                                 f"{', '.join(sorted(self.allow)) or 'nothing'}: --rebuild)")
        flat = "class" not in spec
        settings = dict(spec if flat else spec.get("settings") or {})
        if flat and not settings.get("model"):  # its producer graded with a custom judge, not a model string
            return rebuild(settings, **hook)
        settings = {k: v for k, v in settings.items() if k not in CONNECTION}
        if takes_judge(name):
            settings.update(model=self.model, api_base=self.api_base)
        return rebuild(settings if flat else {"class": name, "settings": settings}, **hook)
