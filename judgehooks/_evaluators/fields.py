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

from .._hooks.agno_compat import AGNO_ASSIGNED, AGNO_SCHEDULES_US
from .._hooks.deployment import Deployment

DEFAULTS = {f.name: f.default for f in dataclasses.fields(Deployment)}


class DeploymentField:
    """An evaluator's deployment setting as an attribute (one per `Deployment` field, set on
    `Evaluator`). The constructor's value is kept for the hook settings; once they exist, a read is
    theirs (``store``: the store built; ``run_in_background``: agno's scheduling answer, see
    `agno_compat`). Assigning one is refused, naming `Evaluator.configure`, except agno's own
    fields (`agno_compat.AGNO_ASSIGNED`), assigned as agno's users assign them, through it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type[Any] | None = None) -> Any:
        if obj is None:
            return DEFAULTS[self.name]
        if self.name == "run_in_background":
            return AGNO_SCHEDULES_US
        shell = obj.__dict__.get("_shell")
        if shell is None:
            return obj.__dict__.get("_deployment", {}).get(self.name, DEFAULTS[self.name])
        if self.name == "store":
            return shell.wiring.store
        return getattr(shell.settings, self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        if "_shell" not in obj.__dict__:  # constructing: the settings are validated together, once
            obj.__dict__.setdefault("_deployment", {})[self.name] = value
        elif self.name in AGNO_ASSIGNED:  # agno's own fields, assigned as agno's users assign them
            obj.configure(**{self.name: value})
        else:
            raise AttributeError(
                f"{self.name!r} is a deployment setting: change it with "
                f"{type(obj).__name__}.configure({self.name}=...), which checks it and says whether it can still "
                f"take effect (assignment is kept for agno's own fields: {', '.join(sorted(AGNO_ASSIGNED))})")


def deploys(cls: type[object], name: str) -> bool:
    """Whether `name` is a deployment setting on `cls`: a `Deployment` field the class does not
    declare as its own (`Budget.max_cost_usd` is the run's limit, not a spend cap)."""
    return isinstance(inspect.getattr_static(cls, name, None), DeploymentField)


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
def own_fields(cls: type[object]) -> frozenset[str]:
    """The settings a (dataclass) evaluator class declares as its own fields: not deployment ones."""
    if not dataclasses.is_dataclass(cls):
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(cls) if f.init and not deploys(cls, f.name))
