"""Deterministic text checks, no LLM call: regex, contains / not contains, exact and label match."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ._context import EvalContext
from ._errors import MissingExpected
from ._evaluator import Evaluator
from ._outcome import Outcome
from ._validate import check_choice, check_strings

_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


class Regex(Evaluator):
    """Passes when the output matches ``pattern`` (searched anywhere), or, with
    ``must_match=False``, when it does not. ``flags`` is letters: i, m, s, x."""

    needs_tools = False

    def __init__(self, pattern: str, *, flags: str = "", must_match: bool = True, **hook: Any) -> None:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"pattern must be a non-empty regular expression string, got {pattern!r}")
        unknown = set(flags) - set(_FLAGS) if isinstance(flags, str) else {flags}
        if unknown:
            raise ValueError(f"flags must be letters from 'imsx', got {flags!r}")
        try:
            self.regex = re.compile(pattern, sum(_FLAGS[f] for f in set(flags)))
        except re.error as exc:
            raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
        self.must_match = bool(must_match)
        self._rebuild = {"pattern": pattern, "flags": flags, "must_match": self.must_match}
        super().__init__(**hook)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        found = self.regex.search(ctx.output)
        where = f"matched {found.group(0)[:80]!r} at {found.start()}" if found else "no match"
        return Outcome(passed=bool(found) == self.must_match, reason=f"/{self.regex.pattern}/: {where}",
                       details={"matched": bool(found), "match": found.group(0)[:200] if found else None})


def _fold(text: str, case_sensitive: bool) -> str:
    return text if case_sensitive else text.casefold()


def _present(values: Sequence[str], output: str, case_sensitive: bool) -> list[str]:
    text = _fold(output, case_sensitive)
    return [v for v in values if _fold(v, case_sensitive) in text]


class Contains(Evaluator):
    """Passes when the output contains every one of ``values`` (``require="all"``) or at least one
    (``require="any"``)."""

    needs_tools = False

    def __init__(self, values: str | Sequence[str], *, require: str = "all", case_sensitive: bool = True,
                 **hook: Any) -> None:
        self.values = check_strings("values", values)
        check_choice("require", require, ("all", "any"))
        self.require = require
        self.case_sensitive = bool(case_sensitive)
        self._rebuild = {"values": list(self.values), "require": require, "case_sensitive": self.case_sensitive}
        super().__init__(**hook)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        present = _present(self.values, ctx.output, self.case_sensitive)
        missing = [v for v in self.values if v not in present]
        passed = not missing if self.require == "all" else bool(present)
        reason = f"missing {missing}" if missing else "all present"
        return Outcome(passed=passed, reason=reason, details={"present": present, "missing": missing})


class NotContains(Evaluator):
    """Passes when the output contains none of ``values``."""

    needs_tools = False

    def __init__(self, values: str | Sequence[str], *, case_sensitive: bool = True, **hook: Any) -> None:
        self.values = check_strings("values", values)
        self.case_sensitive = bool(case_sensitive)
        self._rebuild = {"values": list(self.values), "case_sensitive": self.case_sensitive}
        super().__init__(**hook)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        present = _present(self.values, ctx.output, self.case_sensitive)
        return Outcome(passed=not present, reason=f"found {present}" if present else "none present",
                       details={"present": present})


def expected_for(ctx: EvalContext, expected: str | None, evaluator: str) -> str:
    """The value to compare with: the evaluator's own, else the run's (metadata or offline case)."""
    value = expected if expected is not None else ctx.expected
    if value is None:
        raise MissingExpected(f"{evaluator}: no expected value for this run: pass expected=..., or run the agent "
                              "with metadata={'expected': ...}, or give offline cases an expected_output")
    return value


class ExactMatch(Evaluator):
    """Passes when the output equals the expected value (``expected=`` or the run's expected),
    after stripping surrounding whitespace unless ``strip=False``."""

    needs_tools = False

    def __init__(self, expected: str | None = None, *, strip: bool = True, case_sensitive: bool = True,
                 **hook: Any) -> None:
        if expected is not None and not isinstance(expected, str):
            raise TypeError(f"expected must be a string or None (then the run's expected value is used), "
                            f"got {type(expected).__name__}")
        self.expected = expected
        self.strip = bool(strip)
        self.case_sensitive = bool(case_sensitive)
        self._rebuild = {"expected": expected, "strip": self.strip, "case_sensitive": self.case_sensitive}
        super().__init__(**hook)

    def _norm(self, text: str) -> str:
        return _fold(text.strip() if self.strip else text, self.case_sensitive)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        expected = expected_for(ctx, self.expected, self.evaluator)
        passed = self._norm(ctx.output) == self._norm(expected)
        return Outcome(passed=passed, reason="equal" if passed else f"expected {expected[:80]!r}",
                       details={"expected": expected})


class LabelMatch(Evaluator):
    """Reads a label from the output (the first of ``labels`` to appear as a whole word) and
    passes when it is the expected label (``expected=`` or the run's expected)."""

    needs_tools = False

    def __init__(self, labels: Sequence[str], *, expected: str | None = None, case_sensitive: bool = False,
                 **hook: Any) -> None:
        self.labels = check_strings("labels", labels)
        self.case_sensitive = bool(case_sensitive)
        if expected is not None and self._canonical(expected) is None:
            raise ValueError(f"expected must be one of labels {list(self.labels)}, got {expected!r}")
        self.expected = expected
        flags = 0 if case_sensitive else re.IGNORECASE
        alternatives = "|".join(re.escape(label) for label in sorted(self.labels, key=len, reverse=True))
        self._finder = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", flags)
        self._rebuild = {"labels": list(self.labels), "expected": expected, "case_sensitive": self.case_sensitive}
        super().__init__(**hook)

    def _canonical(self, text: str) -> str | None:
        for label in self.labels:
            if _fold(label, self.case_sensitive) == _fold(text.strip(), self.case_sensitive):
                return label
        return None

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        expected_text = expected_for(ctx, self.expected, self.evaluator)
        expected = self._canonical(expected_text)
        if expected is None:
            raise ValueError(f"{self.evaluator}: the run's expected value {expected_text!r} is not one of the "
                             f"labels {list(self.labels)}")
        found = self._finder.search(ctx.output)
        label = self._canonical(found.group(0)) if found else None
        reason = "no label in the output" if label is None else f"label {label!r}, expected {expected!r}"
        return Outcome(passed=label == expected, reason=reason, details={"label": label, "expected": expected})
