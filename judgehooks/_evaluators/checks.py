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
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, ValidationError

from .._base.context import EvalContext
from .._base.outcome import Outcome
from .._base.validate import check_choice, check_number, check_strings
from ..exceptions import MissingExpected, MissingMetrics
from .base import Evaluator
from .fields import stable_name

_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}
_REGEX_FLAGS = {"i": "IGNORECASE", "m": "MULTILINE", "s": "DOTALL", "x": "VERBOSE"}  # the regex package's names
REGEX_ENGINES = ("regex", "re2")


def _compile(pattern: str, flags: str, engine: str) -> Any:
    """The compiled pattern: by the `regex` package (Python's `re` syntax and meaning; its search
    takes a timeout that really stops the match), or by google-re2 (linear time, no timeout needed)."""
    try:
        re.compile(pattern, sum(_FLAGS[f] for f in set(flags)))  # the syntax and errors users know from `re`
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    if engine == "regex":
        import regex  # ~30 ms to import: loaded by the first Regex check, not by `import judgehooks`

        return regex.compile(pattern, sum(getattr(regex, _REGEX_FLAGS[f]) for f in set(flags)) | regex.VERSION0)
    try:
        import re2  # optional extra: pip install 'judgehooks[re2]'
    except ImportError:
        raise ImportError("engine='re2' needs google-re2: pip install 'judgehooks[re2]'") from None
    if "x" in flags:
        raise ValueError("engine='re2' does not support flag 'x' (verbose patterns)")
    options = re2.Options()
    options.log_errors = False
    inline = "".join(sorted(set(flags)))
    try:
        return re2.compile(f"(?{inline}){pattern}" if inline else pattern, options)
    except re2.error as exc:
        raise ValueError(f"pattern {pattern!r} is not supported by engine='re2' (no backreferences or "
                         f"lookarounds): {exc!r}; use engine='regex'") from None


@dataclass(eq=False)
class Regex(Evaluator):
    """Passes when the output matches ``pattern`` (searched anywhere), or, with
    ``must_match=False``, when it does not. ``flags`` is letters: i, m, s, x.

    The output is hostile text, and a pattern with nested repetition can take exponential time on it
    (``(a|aa)+$``). ``engine="regex"`` (the default: `re` syntax and meaning) stops a search after
    ``timeout`` seconds, which makes the record an ``error`` (``TimeoutError``); ``engine="re2"``
    (the ``re2`` extra) matches in linear time but has no backreferences or lookarounds."""

    pattern: str
    _: KW_ONLY
    flags: str = ""
    must_match: bool = True
    timeout: float = 1.0
    engine: str = "regex"
    regex: Any = field(init=False, repr=False)

    needs_tools = False

    def __post_init__(self) -> None:
        pattern, flags = self.pattern, self.flags
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"pattern must be a non-empty regular expression string, got {pattern!r}")
        unknown = set(flags) - set(_FLAGS) if isinstance(flags, str) else {flags}
        if unknown:
            raise ValueError(f"flags must be letters from 'imsx', got {flags!r}")
        check_number("timeout", self.timeout, minimum=0, allow_equal=False)
        check_choice("engine", self.engine, REGEX_ENGINES)
        self.regex = _compile(pattern, flags, self.engine)
        self.must_match = bool(self.must_match)
        # a pattern that must not match can judge a prefix; one that must match may match later on
        self.prefix_check = not self.must_match  # type: ignore[misc]  # ClassVar set per instance

    def default_name(self) -> str:
        # timeout and engine bound how it searches, not what it looks for: names stay as they were
        return stable_name("regex", {"pattern": self.pattern, "flags": self.flags, "must_match": self.must_match})

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        try:
            if self.engine == "regex":  # off the loop, without the GIL: a slow search holds up no other job
                found = await anyio.to_thread.run_sync(
                    partial(self.regex.search, ctx.output, timeout=self.timeout, concurrent=True))
            else:
                found = self.regex.search(ctx.output)
        except TimeoutError:
            return Outcome(error=TimeoutError(
                f"/{self.pattern}/ did not finish within {self.timeout:g}s on a {len(ctx.output)}-character output "
                f"(catastrophic backtracking): simplify the pattern, raise timeout, or use engine='re2'"))
        where = f"matched {found.group(0)[:80]!r} at {found.start()}" if found else "no match"
        return Outcome(passed=bool(found) == self.must_match, reason=f"/{self.pattern}/: {where}",
                       details={"matched": bool(found), "match": found.group(0)[:200] if found else None})


def _fold(text: str, case_sensitive: bool) -> str:
    return text if case_sensitive else text.casefold()


def _present(values: Sequence[str], output: str, case_sensitive: bool) -> list[str]:
    text = _fold(output, case_sensitive)
    return [v for v in values if _fold(v, case_sensitive) in text]


@dataclass(eq=False)
class Contains(Evaluator):
    """Passes when the output contains every one of ``values`` (``require="all"``) or at least one
    (``require="any"``)."""

    values: str | Sequence[str]
    _: KW_ONLY
    require: str = "all"
    case_sensitive: bool = True

    needs_tools = False

    def __post_init__(self) -> None:
        self.values = check_strings("values", self.values)
        check_choice("require", self.require, ("all", "any"))
        self.case_sensitive = bool(self.case_sensitive)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        present = _present(self.values, ctx.output, self.case_sensitive)
        missing = [v for v in self.values if v not in present]
        passed = not missing if self.require == "all" else bool(present)
        reason = f"missing {missing}" if missing else "all present"
        return Outcome(passed=passed, reason=reason, details={"present": present, "missing": missing})


@dataclass(eq=False)
class NotContains(Evaluator):
    """Passes when the output contains none of ``values``."""

    values: str | Sequence[str]
    _: KW_ONLY
    case_sensitive: bool = True

    needs_tools = False
    prefix_check = True

    def __post_init__(self) -> None:
        self.values = check_strings("values", self.values)
        self.case_sensitive = bool(self.case_sensitive)

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


@dataclass(eq=False)
class ExactMatch(Evaluator):
    """Passes when the output equals the expected value (``expected=`` or the run's expected),
    after stripping surrounding whitespace unless ``strip=False``."""

    expected: str | None = None
    _: KW_ONLY
    strip: bool = True
    case_sensitive: bool = True

    needs_tools = False

    def __post_init__(self) -> None:
        if self.expected is not None and not isinstance(self.expected, str):
            raise TypeError(f"expected must be a string or None (then the run's expected value is used), "
                            f"got {type(self.expected).__name__}")
        self.strip = bool(self.strip)
        self.case_sensitive = bool(self.case_sensitive)

    def _norm(self, text: str) -> str:
        return _fold(text.strip() if self.strip else text, self.case_sensitive)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        expected = expected_for(ctx, self.expected, self.evaluator_name)
        passed = self._norm(ctx.output) == self._norm(expected)
        return Outcome(passed=passed, reason="equal" if passed else f"expected {expected[:80]!r}",
                       details={"expected": expected})


@dataclass(eq=False)
class LabelMatch(Evaluator):
    """Reads a label from the output (the first of ``labels`` to appear as a whole word) and
    passes when it is the expected label (``expected=`` or the run's expected)."""

    labels: Sequence[str]
    _: KW_ONLY
    expected: str | None = None
    case_sensitive: bool = False

    needs_tools = False

    def __post_init__(self) -> None:
        self.labels = check_strings("labels", self.labels)
        self.case_sensitive = bool(self.case_sensitive)
        if self.expected is not None and self._canonical(self.expected) is None:
            raise ValueError(f"expected must be one of labels {list(self.labels)}, got {self.expected!r}")
        flags = 0 if self.case_sensitive else re.IGNORECASE
        alternatives = "|".join(re.escape(label) for label in sorted(self.labels, key=len, reverse=True))
        self._finder = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", flags)

    def _canonical(self, text: str) -> str | None:
        for label in self.labels:
            if _fold(label, self.case_sensitive) == _fold(text.strip(), self.case_sensitive):
                return label
        return None

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        expected_text = expected_for(ctx, self.expected, self.evaluator_name)
        expected = self._canonical(expected_text)
        if expected is None:
            raise ValueError(f"{self.evaluator_name}: the run's expected value {expected_text!r} is not one of the "
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


@dataclass(eq=False)
class IsJSON(Evaluator):
    """Passes when the whole output (surrounding whitespace aside) parses as JSON."""

    needs_tools = False

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        _, problem = _parse(ctx.output.strip())
        return Outcome(passed=problem is None, reason=problem or "valid JSON")


def _jsonschema() -> Any:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("JSONSchema needs the jsonschema package: pip install 'judgehooks[schema]'") from None
    return jsonschema


@dataclass(eq=False)
class JSONSchema(Evaluator):
    """Passes when the output is JSON valid against ``schema`` (checked at construction)."""

    schema: dict[str, Any]

    needs_tools = False

    def __post_init__(self) -> None:
        schema = self.schema
        if not isinstance(schema, dict):
            raise TypeError(f"schema must be a JSON schema dict, got {type(schema).__name__}")
        jsonschema = _jsonschema()
        validator_class = jsonschema.validators.validator_for(schema)
        try:
            validator_class.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"schema is not a valid JSON schema: {exc.message} "
                             f"(at {'/'.join(map(str, exc.path)) or 'the root'})") from None
        self._validator = validator_class(schema)

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        data, problem = _parse(ctx.output.strip())
        if problem is not None:
            return Outcome(passed=False, reason=problem)
        errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        found = [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:5]]
        return Outcome(passed=not errors, reason="; ".join(found) or "valid against the schema",
                       details={"errors": found})


@dataclass(eq=False)
class MatchesModel(Evaluator):
    """Passes when the output validates as the pydantic ``model`` (parsed from JSON).

    Built from user code: `judgehooks resume` needs ``--import`` with the module that makes it."""

    model: type[BaseModel]

    needs_tools = False

    def __post_init__(self) -> None:
        if not (isinstance(self.model, type) and hasattr(self.model, "model_validate")):
            raise TypeError(f"model must be a pydantic BaseModel class, got {self.model!r}")

    def default_name(self) -> str:
        return f"matches-{self.model.__name__}"

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



@dataclass(eq=False)
class ToolUse(Evaluator):
    """Passes when every tool in ``called`` was called (and, with ``succeeded=True``, at least one
    call of it did not error), in the given order when ``in_order=True``, and no tool in
    ``forbidden`` was called. A team run's member calls count."""

    called: str | Sequence[str] = ()
    _: KW_ONLY
    succeeded: bool = True
    in_order: bool = False
    forbidden: str | Sequence[str] = ()

    def __post_init__(self) -> None:
        self.called = check_strings("called", self.called, allow_empty=True)
        self.forbidden = check_strings("forbidden", self.forbidden, allow_empty=True)
        if not self.called and not self.forbidden:
            raise ValueError("ToolUse needs called=[...] and/or forbidden=[...]; with neither it checks nothing")
        both = set(self.called) & set(self.forbidden)
        if both:
            raise ValueError(f"tools {sorted(both)} are both in called and forbidden")
        self.succeeded = bool(self.succeeded)
        self.in_order = bool(self.in_order)

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


@dataclass(eq=False)
class Budget(Evaluator):
    """Passes when the run stayed within every limit given: ``max_latency_ms`` (time until its
    post hooks ran), ``max_tokens`` (input + output), ``max_cost_usd`` (what the run cost). A
    figure the run's metrics do not have is an error, never a pass.

    ``max_cost_usd`` here is the run's limit, not the spend cap of the same name that other
    evaluators take (a Budget makes no judge call: it has nothing to cap but ``max_calls``)."""

    _: KW_ONLY
    max_latency_ms: float | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None

    needs_tools = False

    def __post_init__(self) -> None:
        limits = {"latency_ms": self.max_latency_ms, "total_tokens": self.max_tokens, "cost_usd": self.max_cost_usd}
        for key, value in limits.items():
            if value is not None:
                check_number(f"max_{'tokens' if key == 'total_tokens' else key}", value, minimum=0,
                             allow_equal=True, integer=key == "total_tokens")
        self.limits = {k: v for k, v in limits.items() if v is not None}
        if not self.limits:
            raise ValueError("Budget needs at least one of max_latency_ms, max_tokens, max_cost_usd")

    async def evaluate(self, ctx: EvalContext) -> Outcome:
        usage = ctx.usage
        details: dict[str, Any] = {}
        over: list[str] = []
        for key, limit in self.limits.items():
            actual = None if usage is None else getattr(usage, key)
            if actual is None:
                raise MissingMetrics(f"{self.evaluator_name}: the run's metrics have no {key} "
                                     f"({'no metrics at all' if usage is None else 'not reported by the model'})")
            details[key] = {"limit": limit, "actual": actual}
            if actual > limit:
                over.append(f"{key} {actual:g} > {limit:g}")
        return Outcome(passed=not over, reason="; ".join(over) or "within budget", details=details)
