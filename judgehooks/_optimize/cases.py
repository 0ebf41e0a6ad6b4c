"""The cases an optimization runs: dicts, a JSONL file `judgehooks export` wrote, or a store query.

Every case is checked where it enters (it may come from a file anyone wrote): an input is needed,
text is bounded, and the judge's earlier reason (an export's ``metadata.reason``) is kept as
feedback for the reflection model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .._base.context import render_content
from .._base.jsonlines import json_lines
from .._base.record import EvalRecord
from .._base.secrets import scrub
from .._runtime import runtime
from ..stores import RecordFilter, Store
from ..stores._base import BaseStore, iter_records
from ..stores._url import store_from_url

T = TypeVar("T")

#: the longest text of a case kept, in characters (input, expected output, earlier feedback)
MAX_TEXT_CHARS = 20_000
#: the first bytes of every SQLite database file
SQLITE_HEADER = b"SQLite format 3\x00"


@dataclass(frozen=True, slots=True)
class Case:
    """One input for the agent, with what a good answer is when known."""

    id: str
    input: str
    expected: str | None = None
    feedback: str | None = None  # what a judge said of an earlier answer (an exported failure's reason)
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _text(value: Any) -> str:
    return render_content(value)[:MAX_TEXT_CHARS]


def _reason(value: str) -> str:
    """A judge's earlier reason, as feedback for the reflection model: bounded, credentials masked."""
    return scrub(_text(value))


def case_of(data: Mapping[str, Any], index: int, where: str = "cases") -> Case:
    """One case from a mapping: ``input`` (required), ``expected_output`` or ``expected``, ``metadata``
    (an export's ``reason`` becomes the feedback), ``id``; an ``output`` is the old answer, not needed."""
    if not isinstance(data, Mapping) or "input" not in data or data["input"] in (None, ""):
        raise ValueError(f"{where}[{index}] must be a mapping with an 'input', got {data!r:.120}")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise ValueError(f"{where}[{index}]: 'metadata' must be a mapping, got {type(metadata).__name__}")
    expected = data.get("expected_output", data.get("expected"))
    reason = metadata.get("reason")
    return Case(id=str(data.get("id") or index), input=_text(data["input"]),
                expected=None if expected is None else _text(expected),
                feedback=_reason(reason) if isinstance(reason, str) and reason else None,
                metadata={k: v for k, v in metadata.items() if isinstance(k, str)})


def read_file(path: str | os.PathLike[str]) -> list[Case]:
    """The cases of a JSONL file (one JSON object a line, as `judgehooks export` writes); ValueError
    names the first bad line."""
    return [case_of(data, number, where=str(path)) for number, data in json_lines(path)]


def case_of_record(record: EvalRecord) -> Case:
    expected = next((v for k in ("expected_output", "expected") if isinstance(v := record.metadata.get(k), str)), None)
    return Case(id=record.id, input=_text(record.input), expected=None if expected is None else _text(expected),
                feedback=f"{record.evaluator}: {_reason(record.reason)}" if record.reason else None,
                metadata={"record_id": record.id, "run_id": record.run_id, "evaluator": record.evaluator})


async def read_store(store: Store, where: RecordFilter) -> list[Case]:
    """One case per distinct input among the records `where` picks (newest first)."""
    if not isinstance(store, BaseStore) and not hasattr(store, "query"):
        raise TypeError(f"cases: a store must be a judgehooks store, got {type(store).__name__}")
    found = []
    async for record in iter_records(store, **where.keywords()):
        if record.rejudge_of is None and record.scope != "health" and record.input:
            found.append(case_of_record(record))
    return found


def _names_store(cases: Any, where: RecordFilter | None) -> bool:
    """Whether `cases` is a store, or a string naming one as `judgehooks --store` takes it: a URL, a
    SQLite file, or any path given with `where=` (which only a store's records answer)."""
    if hasattr(cases, "query"):
        return True
    if not isinstance(cases, str):
        return False
    if "://" in cases or where is not None:
        return True
    try:
        with open(cases, "rb") as fh:
            return fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def load_cases(cases: Any, where: RecordFilter | None = None) -> list[Case]:
    """Cases from what `optimize(cases=...)` takes; one per distinct input, in the order given."""
    if isinstance(cases, os.PathLike):
        cases = os.fspath(cases)
    is_store = _names_store(cases, where)
    if is_store and isinstance(cases, str) and "://" not in cases and not Path(cases).is_file():
        raise FileNotFoundError(f"cases: no store file {cases!r}")  # never a new, empty database
    if where is not None and not is_store:
        raise ValueError("where= filters a store's records: give cases=<store, store URL or path> with it")
    if isinstance(cases, str) and not is_store:
        if not Path(cases).is_file():
            raise FileNotFoundError(f"cases: no file {str(cases)!r} (a JSONL file `judgehooks export` writes)")
        found = read_file(cases)
    elif is_store:
        store = store_from_url(cases) if isinstance(cases, str) else cases
        found = runtime.call(read_store, store, where or RecordFilter(status="failed"))
    elif isinstance(cases, Iterable) and not isinstance(cases, (bytes, Mapping)):
        found = [c if isinstance(c, Case) else case_of(c, i) for i, c in enumerate(cases)]
    else:
        raise TypeError("cases must be a list of dicts with 'input', a JSONL file path, or a judgehooks store "
                        f"(or its URL), got {type(cases).__name__}")
    return _distinct(found)


def _distinct(cases: Sequence[Case]) -> list[Case]:
    seen: set[str] = set()
    kept = []
    for case in cases:
        if case.input not in seen:
            seen.add(case.input)
            kept.append(case)
    return kept


def split(cases: Sequence[T], holdout: float, seed: int) -> tuple[list[T], list[T]]:
    """(train, held out): a seeded shuffle, at least one case on each side."""
    import random

    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be a fraction between 0 and 1 (exclusive), got {holdout!r}")
    if len(cases) < 2:
        raise ValueError(f"optimize needs at least 2 distinct cases (some to learn from, some held out), "
                         f"got {len(cases)}")
    order = list(cases)
    random.Random(seed).shuffle(order)
    held = min(len(order) - 1, max(1, round(len(order) * holdout)))
    return order[held:], order[:held]
