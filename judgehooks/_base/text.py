"""Text that every store, file and wire format can hold.

A Python string may carry a lone UTF-16 surrogate (``"\\ud83d"``: half an emoji, e.g. from a JSON
escape a model wrote), which UTF-8 cannot encode: SQLite, JSONL, the outbox, Redis and pydantic's
JSON all refuse it. Text from a run is made storable once, where it enters (the snapshot), and
again when a record is built, so no store write can fail on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast


def lazy_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A regular expression compiled on first use, so `import judgehooks` compiles none it may never
    run; used like the compiled pattern (``search``, ``match``, ``sub``, ...)."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))


class _LazyPattern:

    __slots__ = ("_compiled", "_flags", "_pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern, self._flags = pattern, flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(self._pattern, self._flags)
        return getattr(self._compiled, name)


def storable(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a proper pair becomes its character)."""
    if text.isascii():  # O(1) for an ASCII-only string
        return text
    try:
        text.encode("utf-8")  # the fastest test in CPython (faster than a regex or max())
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def storable_data(value: Any) -> Any:
    """`storable` applied to every string in JSON-like data (dict keys and values, lists, tuples);
    other objects (a namedtuple, a model, a set) are returned as they are: the stores' JSON
    fallback writes them whatever they hold. Data with nothing to mend (almost all of it) is
    returned as it is, after one walk that allocates nothing."""
    return value if _is_storable(value) else _mend(value)


_SCALARS = frozenset({int, float, bool})  # no text inside: a record's numbers need no walk


def storable_values(data: dict[str, Any]) -> dict[str, Any]:
    """`storable_data` for a dict whose keys are known to be storable (a record's field names): only
    its values are walked. Returns `data` itself when nothing needs mending."""
    for item in data.values():
        kind = type(item)
        if kind is str:
            if not item.isascii() and storable(item) is not item:
                return _mend(data)  # type: ignore[no-any-return]
        elif item is not None and kind not in _SCALARS and not _is_storable(item):
            return _mend(data)  # type: ignore[no-any-return]
    return data


def _is_storable(value: Any) -> bool:
    """No string in `value` needs mending (the common cases are tested inline: this walks every
    record's fields on the hot path)."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if not (type(key) is str and key.isascii()) and not _is_storable(key):
                return False
            kind = type(item)
            if kind is str:
                if not item.isascii() and storable(item) is not item:
                    return False
            elif item is not None and kind not in _SCALARS and not _is_storable(item):
                return False
        return True
    if kind is list or kind is tuple:
        return all(_is_storable(item) for item in value)
    if isinstance(value, str):
        return value.isascii() or storable(value) is value
    return True


def unstorable_at(value: Any, where: str = "") -> tuple[str, int] | None:
    """Where the first string in JSON-like `value` that UTF-8 cannot carry is: (the path to it, as
    ``key[0].key``, and the index of its first lone surrogate), or None when there is none."""
    if isinstance(value, str):
        if value.isascii() or storable(value) is value:
            return None
        return where, next(i for i, ch in enumerate(value) if "\ud800" <= ch <= "\udfff")
    if isinstance(value, Mapping):
        found = (unstorable_at(key, where) or unstorable_at(item, f"{where}.{key}" if where else str(key))
                 for key, item in value.items())
    elif isinstance(value, (list, tuple)):
        found = (unstorable_at(item, f"{where}[{i}]") for i, item in enumerate(value))
    else:
        return None
    return next((place for place in found if place is not None), None)


def lone_surrogate(label: str, at: int) -> ValueError:
    """The error for a developer's own text (a setting) holding a lone surrogate at character `at`."""
    return ValueError(f"{label} (character {at}) holds a lone surrogate (half of a UTF-16 pair, as an escape like "
                      f"'\\ud83d' makes): no judge, store or file can carry it; write the whole character")


def _mend(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    kind = type(value)
    if kind is dict:
        return {_mend(k): _mend(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return kind(_mend(v) for v in value)
    return value
