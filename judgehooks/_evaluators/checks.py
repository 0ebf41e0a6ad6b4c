"""Deterministic checks, no LLM call.

- text: regex, contains / not contains, exact and label match;
- structure: the output parses as JSON, fits a JSON schema, or validates as a pydantic model
  (failures name the first problems and where they are);
- the run: its tool calls (team members' included, in the order they started) and its latency,
  token and cost budgets from agno's run metrics.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from .._base.context import EvalContext
from .._base.outcome import Outcome
from .._base.validate import check_choice, check_number, check_strings
from ..exceptions import MissingExpected, MissingMetrics
from .base import Evaluator

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


def _parse(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"


class IsJSON(Evaluator):
    """Passes when the whole output (surrounding whitespace aside) parses as JSON."""

    needs_tools = False

    def __init__(self, **hook: Any) -> None:
        self._rebuild = {}
        super().__init__(**hook)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        _, problem = _parse(ctx.output.strip())
        return Outcome(passed=problem is None, reason=problem or "valid JSON")


def _jsonschema() -> Any:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("JSONSchema needs the jsonschema package: pip install 'judgehooks[schema]'") from None
    return jsonschema


class JSONSchema(Evaluator):
    """Passes when the output is JSON valid against ``schema`` (checked at construction)."""

    needs_tools = False

    def __init__(self, schema: dict[str, Any], **hook: Any) -> None:
        if not isinstance(schema, dict):
            raise TypeError(f"schema must be a JSON schema dict, got {type(schema).__name__}")
        jsonschema = _jsonschema()
        validator_class = jsonschema.validators.validator_for(schema)
        try:
            validator_class.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"schema is not a valid JSON schema: {exc.message} "
                             f"(at {'/'.join(map(str, exc.path)) or 'the root'})") from None
        self.schema = schema
        self._validator = validator_class(schema)
        self._rebuild = {"schema": schema}
        super().__init__(**hook)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        data, problem = _parse(ctx.output.strip())
        if problem is not None:
            return Outcome(passed=False, reason=problem)
        errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        found = [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:5]]
        return Outcome(passed=not errors, reason="; ".join(found) or "valid against the schema",
                       details={"errors": found})


class MatchesModel(Evaluator):
    """Passes when the output validates as the pydantic ``model`` (parsed from JSON).

    Built from user code: `judgehooks resume` needs ``--import`` with the module that makes it."""

    needs_tools = False

    def __init__(self, model: type, **hook: Any) -> None:
        if not (isinstance(model, type) and hasattr(model, "model_validate")):
            raise TypeError(f"model must be a pydantic BaseModel class, got {model!r}")
        self.model = model
        hook.setdefault("name", f"matches-{model.__name__}")
        super().__init__(**hook)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        data, problem = _parse(ctx.output.strip())
        if problem is not None:
            return Outcome(passed=False, reason=problem)
        try:
            self.model.model_validate(data)
        except ValidationError as exc:
            found = [f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()[:5]]
            return Outcome(passed=False, reason="; ".join(found), details={"errors": found})
        return Outcome(passed=True, reason=f"valid {self.model.__name__}")



class ToolUse(Evaluator):
    """Passes when every tool in ``called`` was called (and, with ``succeeded=True``, at least one
    call of it did not error), in the given order when ``in_order=True``, and no tool in
    ``forbidden`` was called. A team run's member calls count."""

    def __init__(self, called: str | Sequence[str] = (), *, succeeded: bool = True, in_order: bool = False,
                 forbidden: str | Sequence[str] = (), **hook: Any) -> None:
        self.called = check_strings("called", called, allow_empty=True)
        self.forbidden = check_strings("forbidden", forbidden, allow_empty=True)
        if not self.called and not self.forbidden:
            raise ValueError("ToolUse needs called=[...] and/or forbidden=[...]; with neither it checks nothing")
        both = set(self.called) & set(self.forbidden)
        if both:
            raise ValueError(f"tools {sorted(both)} are both in called and forbidden")
        self.succeeded = bool(succeeded)
        self.in_order = bool(in_order)
        self._rebuild = {"called": list(self.called), "succeeded": self.succeeded, "in_order": self.in_order,
                         "forbidden": list(self.forbidden)}
        super().__init__(**hook)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        calls = [c for c in ctx.tool_calls if not (self.succeeded and c.error)]
        names = [c.name for c in calls]
        problems: list[str] = []
        missing = [n for n in self.called if n not in names]
        if missing:
            errored = {c.name for c in ctx.tool_calls if c.error} & set(missing)
            problems.append(f"not called{' successfully' if self.succeeded else ''}: {missing}"
                            + (f" ({sorted(errored)} errored)" if errored else ""))
        elif self.in_order:
            firsts = [names.index(n) for n in self.called]
            if firsts != sorted(firsts):
                actual = sorted(self.called, key=lambda n: names.index(n))
                problems.append(f"called in the order {actual}, required {list(self.called)}")
        used = [n for n in self.forbidden if any(c.name == n for c in ctx.tool_calls)]
        if used:
            problems.append(f"forbidden tools called: {used}")
        trajectory = [{"name": c.name, "error": c.error, "agent_id": c.agent_id} for c in ctx.tool_calls]
        return Outcome(passed=not problems, reason="; ".join(problems) or f"tool calls as required: {names}",
                       details={"calls": trajectory})


class Budget(Evaluator):
    """Passes when the run stayed within every limit given: ``max_latency_ms`` (time until its
    post hooks ran), ``max_tokens`` (input + output), ``max_cost_usd``. A figure the run's metrics
    do not have is an error, never a pass."""

    needs_tools = False

    def __init__(self, *, max_latency_ms: float | None = None, max_tokens: int | None = None,
                 max_cost_usd: float | None = None, **hook: Any) -> None:
        limits = {"latency_ms": max_latency_ms, "total_tokens": max_tokens, "cost_usd": max_cost_usd}
        for key, value in limits.items():
            if value is not None:
                check_number(f"max_{'tokens' if key == 'total_tokens' else key}", value, minimum=0,
                             allow_equal=True, integer=key == "total_tokens")
        self.limits = {k: v for k, v in limits.items() if v is not None}
        if not self.limits:
            raise ValueError("Budget needs at least one of max_latency_ms, max_tokens, max_cost_usd")
        self._rebuild = {"max_latency_ms": max_latency_ms, "max_tokens": max_tokens, "max_cost_usd": max_cost_usd}
        super().__init__(**hook)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        usage = ctx.usage
        details: dict[str, Any] = {}
        over: list[str] = []
        for key, limit in self.limits.items():
            actual = None if usage is None else getattr(usage, key)
            if actual is None:
                raise MissingMetrics(f"{self.evaluator}: the run's metrics have no {key} "
                                     f"({'no metrics at all' if usage is None else 'not reported by the model'})")
            details[key] = {"limit": limit, "actual": actual}
            if actual > limit:
                over.append(f"{key} {actual:g} > {limit:g}")
        return Outcome(passed=not over, reason="; ".join(over) or "within budget", details=details)
