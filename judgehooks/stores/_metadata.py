"""A record's metadata value as the pages compare and count it: in Python (`meta_text`) and in
the SQL of SQLite and PostgreSQL (`meta_sql`), alike."""

from __future__ import annotations

import json
from typing import Any


def meta_text(value: Any) -> str | None:
    """A metadata value as a filter compares it: text as it is, a number or true/false as JSON
    writes it; a list, an object or null matches no filter."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return None


def meta_sql(mark: str, key: str) -> tuple[str, list[Any]]:
    """SQL for "metadata[key], as `meta_text` writes it", bound as parameters (the key never is SQL)."""
    if mark == "%s":
        return "metadata ->> %s", [key]
    path = f'$."{key}"'  # a key holds no '"' or backslash (the page refuses them)
    return ("CASE json_type(metadata, ?) WHEN 'text' THEN json_extract(metadata, ?) WHEN 'true' THEN 'true' "
            "WHEN 'false' THEN 'false' WHEN 'integer' THEN CAST(json_extract(metadata, ?) AS TEXT) "
            "WHEN 'real' THEN CAST(json_extract(metadata, ?) AS TEXT) END", [path] * 4)
