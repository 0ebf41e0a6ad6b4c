"""The id a record gives an agno agent or team that was built with neither `id=` nor `name=`.

agno makes such an id up anew in every process (`generate_human_readable_id`: `adjective-name-hex8`),
so its records would scatter over ids no filter can name tomorrow. Ours is derived from what makes
the agent what it is (its kind, model, description, role, instructions, system message, tools,
output schema and, for a team, its members), so the same agent in another process, or after a
restart, is stored under the same `unnamed-agent-<12 hex>`. An id given by `id=` or derived by agno
from `name=` is kept as it is.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

_GENERATED = re.compile(r"([a-z]+)-([a-z]+)-[0-9a-f]{8}")
_FIELDS = ("description", "role", "instructions", "system_message", "expected_output", "output_schema")


def _agno_made_up(value: Any) -> bool:
    """Whether `value` has the shape and words of the id agno makes up for a component without a
    name (read from agno's own word lists, so a user's `id="blue-sky-12345678"` stays theirs)."""
    found = _GENERATED.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        return False
    try:
        from agno.utils.names import _ADJECTIVES, _NAMES
    except ImportError:  # agno moved its word lists: keep agno's id rather than guess
        return False
    return found.group(1) in _ADJECTIVES and found.group(2) in _NAMES


def _label(value: Any) -> Any:
    """A JSON-able stand-in for one setting: text as it is, anything else by its type's name."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_label(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _label(item) for key, item in value.items()}
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    name = getattr(value, "name", None) or getattr(value, "__qualname__", None)
    return name if isinstance(name, str) else type(value).__qualname__


def fingerprint(owner: Any) -> dict[str, Any]:
    """What decides which agent (or team) this is, across processes: never a made-up id."""
    model = getattr(owner, "model", None)
    found: dict[str, Any] = {
        "kind": type(owner).__qualname__,
        "model": None if model is None else [type(model).__qualname__, _label(getattr(model, "id", model))],
        **{field: _label(getattr(owner, field, None)) for field in _FIELDS},
        "tools": _label(list(getattr(owner, "tools", None) or ())),
    }
    members = getattr(owner, "members", None)
    if isinstance(members, list | tuple):
        found["members"] = [stable_id(m, getattr(m, "id", None)) for m in members]
    return found


def stable_id(owner: Any, found: Any) -> Any:
    """`found` (the id agno gave `owner`), or a stable one when agno made it up for want of a name."""
    if owner is None or getattr(owner, "name", None) or not _agno_made_up(found):
        return found
    text = json.dumps(fingerprint(owner), sort_keys=True, ensure_ascii=True)
    kind = "team" if hasattr(owner, "members") else "agent"
    return f"unnamed-{kind}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
