"""Reading a JSONL file of cases for `judgehooks grade`: every line checked, errors name the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

REQUIRED = ("input", "output")
OPTIONAL = ("expected_output", "expected", "metadata", "id")
_CONTENT = (str, dict, list)
#: the longest line read, in bytes (`judgehooks grade --max-line-bytes`); a longer one is skipped unread
MAX_LINE_BYTES = 16 * 1024 * 1024
#: the deepest nesting of arrays and objects a case may have
MAX_DEPTH = 64


class CaseError(ValueError):
    """One bad line: ``file:line: what is wrong``."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.line = line


def parse_case(text: str) -> dict[str, Any]:
    """One line as a case for `AgentAsJudgeEval.run(cases=...)`; ValueError says what is wrong."""
    try:
        case = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"bad JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    if _depth(case) > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    if not isinstance(case, dict):
        raise ValueError(f"expected a JSON object with input and output, got {_kind(case)}")
    missing = [k for k in REQUIRED if k not in case]
    if missing:
        raise ValueError(f"missing {' and '.join(repr(k) for k in missing)} (each line needs input and output)")
    unknown = sorted(set(case) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))} "
                         f"(allowed: {', '.join(REQUIRED + OPTIONAL)})")
    for key in ("input", "output", "expected_output", "expected"):
        value = case.get(key)
        if key in case and not isinstance(value, _CONTENT) and not (key.startswith("expected") and value is None):
            raise ValueError(f"{key!r} must be a string (or a JSON object/array), got {_kind(value)}")
    if "expected_output" in case and "expected" in case:
        raise ValueError("give 'expected_output' or 'expected', not both")
    metadata = case.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ValueError(f"'metadata' must be a JSON object, got {_kind(metadata)}")
    if isinstance(metadata, dict) and "case" in metadata:
        raise ValueError("'metadata.case' is reserved: judgehooks records the file and line there")
    if "id" in case and not isinstance(case["id"], (str, int)):
        raise ValueError(f"'id' must be a string or an integer, got {_kind(case['id'])}")
    return case


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            if deepest > MAX_DEPTH:
                break
            stack.extend((child, level + 1) for child in children)
    return deepest


def _lines(f: Any, max_bytes: int) -> Iterator[bytes | None]:
    """Each line of a binary file, or None for a line longer than `max_bytes`: that one is read
    past a megabyte at a time and never held whole."""
    while True:
        raw = f.readline(max_bytes + 1)
        if not raw:
            return
        if len(raw) > max_bytes and not raw.endswith(b"\n"):
            while (rest := f.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield None
        else:
            yield raw


def read_cases(path: str, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, dict[str, Any] | CaseError]]:
    """(line number, case or the CaseError for that line), skipping blank lines.
    OSError if the file cannot be read."""
    with open(path, "rb") as f:
        for number, raw in enumerate(_lines(f, max_line_bytes), start=1):
            if raw is None:
                yield number, CaseError(path, number, f"line longer than {max_line_bytes} bytes "
                                                      "(--max-line-bytes): not read")
                continue
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, CaseError(path, number, f"not UTF-8 text (byte {exc.start + 1})")
                continue
            if not text.strip():
                continue
            try:
                yield number, parse_case(text)
            except ValueError as exc:
                yield number, CaseError(path, number, str(exc))


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)
