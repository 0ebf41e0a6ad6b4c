"""The one JSON fallback: every store, the outbox, the spill and results files write through it.

Anything JSON cannot hold (an object in a run's metadata, bytes that are not UTF-8) becomes
``str(value)``; nothing here raises for odd data, so odd metadata never costs a record.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from .record import EvalRecord
from .text import storable_data

#: what pydantic raises for values it knows but cannot write (e.g. bytes that are not UTF-8)
_UNWRITABLE = (PydanticSerializationError, UnicodeDecodeError, ValueError)


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data with storable text, by the module's fallback; never raises."""
    try:
        found = to_jsonable_python(value, fallback=str)
    except _UNWRITABLE:
        found = json.loads(json.dumps(value, default=str, skipkeys=True))
    return storable_data(found)  # plain data now: every string in it made storable


def json_bytes(value: Any) -> bytes:
    """`value` as UTF-8 JSON, with `jsonable`'s fallback."""
    try:
        return to_json(value, fallback=str)
    except _UNWRITABLE:
        return to_json(jsonable(value))


def json_text(value: Any) -> str:
    """`value` as JSON text, with `jsonable`'s fallback."""
    return json_bytes(value).decode()


def record_data(record: EvalRecord) -> dict[str, Any]:
    """One record as JSON data, with `jsonable`'s fallback: never raises for odd metadata."""
    try:
        return record.model_dump(mode="json", fallback=str)
    except _UNWRITABLE:
        return storable(record).model_dump(mode="json")


def record_json(record: EvalRecord) -> str:
    """One record as JSON text, with `jsonable`'s fallback: never raises for odd metadata."""
    try:
        return record.model_dump_json(fallback=str)
    except _UNWRITABLE:
        return storable(record).model_dump_json()


def storable(record: EvalRecord) -> EvalRecord:
    """The record with its metadata and details made plain JSON data (itself when they already are),
    for stores that keep records as objects or hand them to a library that serialises them."""
    metadata, details = jsonable(record.metadata), jsonable(record.details)
    if metadata == record.metadata and details == record.details:
        return record
    return dataclasses.replace(record, metadata=metadata, details=details)
