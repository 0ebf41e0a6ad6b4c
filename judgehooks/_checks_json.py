"""Structured-output checks, no LLM call: the output parses as JSON, fits a JSON schema, or
validates as a pydantic model. Failures name the first problems and where they are."""

from __future__ import annotations

import json
from typing import Any

from ._context import EvalContext
from ._evaluator import Evaluator
from ._outcome import Outcome


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
        from pydantic import ValidationError

        data, problem = _parse(ctx.output.strip())
        if problem is not None:
            return Outcome(passed=False, reason=problem)
        try:
            self.model.model_validate(data)
        except ValidationError as exc:
            found = [f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()[:5]]
            return Outcome(passed=False, reason="; ".join(found), details={"errors": found})
        return Outcome(passed=True, reason=f"valid {self.model.__name__}")
