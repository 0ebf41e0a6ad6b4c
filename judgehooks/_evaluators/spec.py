"""Rebuild an evaluator in another process from the spec its jobs carry (`judgehooks resume`, workers).

The classes a spec may name are the built-in evaluator classes, registered as they are defined
(`Evaluator.__init_subclass__`): a spec can never name an arbitrary importable object, and this
module never imports the package face.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import NotRebuildable

_classes: dict[str, type[Any]] = {}


def register(cls: type[Any]) -> None:
    """Called for every Evaluator subclass; only judgehooks' own classes can be rebuilt from a spec."""
    if cls.__module__.startswith("judgehooks.") and not cls.__name__.startswith("_"):
        _classes[cls.__name__] = cls


def rebuild(spec: dict[str, Any] | None, **hook: Any) -> Any:
    """An evaluator from the spec its process stored with its jobs: AgentAsJudgeEval settings, or
    {"class": <a judgehooks evaluator>, "settings": {...}}. Evaluators made from user code (functions,
    pydantic models, composites, custom judges) store no spec: they need --import (NotRebuildable).
    Background grading unless `hook` says otherwise (a worker grades in the foreground)."""
    if spec is None:
        raise NotRebuildable("it was built from user code (a function, a model, a composite or a custom judge)")
    settings = dict(spec.get("settings") or {}) if "class" in spec else dict(spec)
    if "class" in spec:
        cls = _classes.get(spec["class"]) if isinstance(spec["class"], str) else None
        if cls is None:
            raise NotRebuildable(f"its spec names {spec['class']!r}, which is not a judgehooks evaluator")
    else:
        cls = _classes["AgentAsJudgeEval"]
        if not spec.get("model"):
            raise NotRebuildable("its judge is not a litellm model string")
    settings = {k: v for k, v in settings.items() if v is not None}
    return cls(**settings, **{"run_in_background": True, **hook})
