"""The number settings of `optimize` and `align_judge`, checked before any work with the validator every
other setting uses (`_base.validate`): each error names the setting, and NaN and infinity are refused
(a NaN passes every plain range check, so `max_calls=nan` would have run uncapped)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._base.validate import check_number, check_optional_number


def _whole(minimum: int) -> Callable[[str, Any], None]:
    return lambda name, value: check_number(name, value, minimum=minimum, integer=True)


#: how each setting is checked
RULES: dict[str, Callable[[str, Any], None]] = {
    "max_metric_calls": _whole(1),
    "concurrency": _whole(1),
    "minibatch_size": _whole(1),
    "resamples": _whole(1),
    "few_shot": _whole(0),
    "seed": lambda name, value: check_number(name, value, integer=True),
    "holdout": lambda name, value: check_number(name, value, minimum=0, allow_equal=False, maximum=1),
    "timeout": lambda name, value: check_number(name, value, minimum=0, allow_equal=False),
    "max_calls": lambda name, value: check_optional_number(name, value, minimum=0, allow_equal=False, integer=True),
    "max_cost_usd": lambda name, value: check_optional_number(name, value, minimum=0, allow_equal=False),
}


def check_settings(**values: Any) -> None:
    """Refuse, by name, the first setting that is not a finite number in its range."""
    for name, value in values.items():
        RULES[name](name, value)
