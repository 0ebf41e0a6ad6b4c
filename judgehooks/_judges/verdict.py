"""Reading a judge's reply into a Verdict. Pure, tolerant of the shapes real models produce.

Order: the whole reply as JSON; a JSON object inside prose or a code fence; then labelled lines
(`SCORE:`, `PASSED:`, `REASONING:`). Anything else raises `MalformedVerdict`, which the core turns
into an `error` record after retries: a reply we cannot read is never a pass or a fail.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .._base.record import Mode
from ..exceptions import MalformedVerdict

_SCORE_LINE = re.compile(r"^\W*score\W*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE | re.MULTILINE)
_PASSED_LINE = re.compile(r"^\W*(?:passed|pass|verdict|result)\W*[:=]\s*\**\s*(\w+)", re.IGNORECASE | re.MULTILINE)
_REASON_LINE = re.compile(r"\b(?:reasoning|reason)\W*[:=]\s*(.+)", re.IGNORECASE)
_TRUE = {"true", "yes", "pass", "passed", "1"}
_FALSE = {"false", "no", "fail", "failed", "0"}


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool | None  # binary verdicts only; numeric ones are thresholded by the evaluator
    score: int | None
    reason: str


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object embedded in text, in order."""
    found, decoder, i = [], json.JSONDecoder(), text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        i = text.find("{", end)
    return found


def _as_score(value: Any) -> int:
    if isinstance(value, bool):
        raise MalformedVerdict(f"score must be an integer 1-10, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise MalformedVerdict(f"score must be an integer 1-10, got {value!r}") from None
    if not number.is_integer() or not 1 <= number <= 10:
        raise MalformedVerdict(f"score must be an integer 1-10, got {value!r}")
    return int(number)


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise MalformedVerdict(f"passed must be true or false, got {value!r}")


def _from_mapping(obj: dict[str, Any], mode: Mode) -> Verdict:
    reason = str(obj.get("reason") or obj.get("reasoning") or "")
    if mode == "numeric":
        return Verdict(passed=None, score=_as_score(obj["score"]), reason=reason)
    return Verdict(passed=_as_bool(obj["passed"]), score=None, reason=reason)


def parse_verdict(text: str | None, mode: Mode) -> Verdict:
    """Parse a judge reply for `mode`; raise MalformedVerdict naming what was wrong."""
    if not text or not text.strip():
        raise MalformedVerdict("judge reply is empty")
    key = "score" if mode == "numeric" else "passed"
    for obj in _json_objects(text):
        if key in obj:
            return _from_mapping(obj, mode)
    line = (_SCORE_LINE if mode == "numeric" else _PASSED_LINE).search(text)
    if line:
        reason_match = _REASON_LINE.search(text)
        reason = reason_match.group(1).strip() if reason_match else ""
        value = line.group(1)
        if mode == "numeric":
            return Verdict(passed=None, score=_as_score(value), reason=reason)
        return Verdict(passed=_as_bool(value), score=None, reason=reason)
    snippet = text.strip().replace("\n", " ")[:120]
    raise MalformedVerdict(f"judge reply has no {key!r} (not JSON, no {key.upper()}: line): {snippet!r}")
