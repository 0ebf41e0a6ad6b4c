"""Construction-time checks shared by evaluators: each error names the parameter and what is allowed."""

from __future__ import annotations

from typing import Any


def check_number(name: str, value: Any, *, minimum: float, allow_equal: bool, integer: bool = False) -> None:
    bad_type = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
    if bad_type or value < minimum or (value == minimum and not allow_equal):
        kind = "an integer" if integer else "a number"
        bound = f">= {minimum}" if allow_equal else f"> {minimum}"
        raise ValueError(f"{name} must be {kind} {bound}, got {value!r}")


def check_name(name: Any, owner: str = "name") -> None:
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"{owner} must be a non-empty string or None, got {name!r}")


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
