"""Text that every store, file and wire format can hold.

A Python string may carry a lone UTF-16 surrogate (``"\\ud83d"``: half an emoji, e.g. from a JSON
escape a model wrote), which UTF-8 cannot encode: SQLite, JSONL, the outbox, Redis and pydantic's
JSON all refuse it. Text from a run is made storable once, where it enters (the snapshot), and
again when a record is built, so no store write can fail on it.
"""

from __future__ import annotations

import re
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
    fallback writes them whatever they hold."""
    if isinstance(value, str):
        return storable(value)
    kind = type(value)
    if kind is dict:
        return {storable_data(k): storable_data(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return kind(storable_data(v) for v in value)
    return value
