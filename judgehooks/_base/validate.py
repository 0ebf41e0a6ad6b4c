"""Construction-time checks shared by evaluators: each error names the parameter and what is allowed."""

from __future__ import annotations

import math
from typing import Any

from .text import lone_surrogate, unstorable_at


def check_finite(name: str, value: Any) -> None:
    """Refuse NaN and infinity by name. Every comparison with NaN is false, so a NaN timeout, cap or
    delay passes a plain range check and switches its control off; infinity does too. Every number
    setting goes through here (`check_number` calls it first)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r} (NaN and infinity are refused: "
                         f"they would switch this setting's control off)")


def check_number(name: str, value: Any, *, minimum: float | None = None, allow_equal: bool = True,
                 integer: bool = False, maximum: float | None = None) -> None:
    """A finite number (an integer if `integer`) in [minimum, maximum], minimum excluded unless
    `allow_equal`."""
    bad_type = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
    if not bad_type:
        check_finite(name, value)
    low = minimum is not None and (value < minimum or (value == minimum and not allow_equal)) if not bad_type else False
    if bad_type or low or (maximum is not None and value > maximum):
        bounds = [f">= {minimum}" if allow_equal else f"> {minimum}"] if minimum is not None else []
        bounds += [f"<= {maximum}"] if maximum is not None else []
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {' '.join([kind, ' and '.join(bounds)]).rstrip()}, got {value!r}")


def check_optional_number(name: str, value: Any, **bounds: Any) -> None:
    """`check_number`, with None allowed (the setting is off)."""
    if value is not None:
        check_number(name, value, **bounds)


def check_name(name: Any, owner: str = "name") -> None:
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"{owner} must be a non-empty string or None, got {name!r}")
    found = None if name is None else unstorable_at(name)  # every record id hashes it, on every run's hook
    if found is not None:
        raise lone_surrogate(owner, found[1])


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def check_strings(name: str, value: Any, *, allow_empty: bool = False) -> tuple[str, ...]:
    """A string or a sequence of strings, as a tuple."""
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise TypeError(f"{name} must be a string or a list of strings, got {type(value).__name__}")
    if not items and not allow_empty:
        raise ValueError(f"{name} must not be empty")
    return tuple(items)
