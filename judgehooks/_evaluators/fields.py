"""What an evaluator class declares: which of its fields are deployment settings, which travel in a
job's spec, and the stable default name."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
from collections.abc import Mapping
from typing import Any

from .._hooks.settings import HookSettings

HOOK_SETTINGS = HookSettings.names()


def deploys(cls: type[object], name: str) -> bool:
    """Whether `name` is a deployment setting on `cls`: one of HookSettings' names that the class
    does not claim as its own (`Budget.max_cost_usd` is the run's limit, not a spend cap)."""
    return name in HOOK_SETTINGS and name not in getattr(cls, "own_settings", ())


def stable_name(kind: str, settings: Any) -> str:
    """A default evaluator name that is the same in every process for the same settings."""
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True, default=repr).encode()).hexdigest()[:10]
    return f"{kind}-{digest}"


def plain(value: Any) -> bool:
    """Whether a setting can travel in a job's spec (JSON data, not code or objects)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (list, tuple)):
        return all(plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    return False


@functools.cache
def field_names(cls: type[object]) -> frozenset[str]:
    """The settings a (dataclass) evaluator class declares as its fields."""
    if not dataclasses.is_dataclass(cls):
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(cls) if f.init)


@functools.cache
def own_parameters(cls: type[object]) -> frozenset[str]:
    """The keyword arguments a class's __init__ names itself (agno's AgentAsJudgeEval names some
    deployment settings, e.g. on_fail and db, in its own signature)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in inspect.signature(cls.__init__).parameters.values() if p.kind in kinds)
