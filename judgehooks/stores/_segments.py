"""Pass rates broken down by one dimension (a user, an agent, a team, or any metadata key), counted
in the store: SQL for SQLite and PostgreSQL, one pass over the records for other stores. Verdicts
only (passed or failed), re-judgements left out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import _rollup, _rollup_meta
from ._base import Store
from ._browse import Browse, _records, _sql
from ._metadata import meta_sql, meta_text
from ._rollup_read import parts
from ._textsearch import index_text as _index_text

#: the dimensions a breakdown takes besides ``meta:<key>``: the record field each names
FIELDS = {"user": "user_id", "agent": "agent_id", "team": "team_id", "session": "session_id",
          "version": "evaluator_version", "evaluator": "evaluator"}
#: the record fields the rollup keeps (`stores._rollup`), and its column for each
_ROLLED = {"agent_id": "agent", "team_id": "team", "evaluator_version": "version", "evaluator": "evaluator"}
#: segments returned at most (the largest first); the page says how many more there are
LIMIT = 200


@dataclass(frozen=True, slots=True)
class Segment:
    value: str | None  # None: records without the dimension (no user id, no such metadata key)
    n: int
    passed: int


def dimension(by: str) -> tuple[str | None, str | None]:
    """(record field, metadata key) that `by` names; ValueError naming what it takes otherwise."""
    if by in FIELDS:
        return FIELDS[by], None
    kind, _, key = by.partition(":")
    if kind == "meta" and key and '"' not in key and "\\" not in key and len(key) <= 200:
        return None, key
    raise ValueError(f"by takes {', '.join(FIELDS)} or meta:<key> (a metadata key without '\"' or '\\\\'), "
                     f"got {by[:60]!r}")


async def segments(store: Store, browse: Browse, by: str) -> tuple[list[Segment], int]:
    """The verdicts of `browse` per value of `by` (largest segments first, at most `LIMIT`), and how
    many segments there are in all."""
    column, key = dimension(by)
    browse = browse.replace(judged=True)
    sql = _sql(store)
    if sql is None:
        counts: dict[str | None, list[int]] = {}
        async for record in _records(store, browse):
            value = getattr(record, column) if column else meta_text(record.metadata.get(key)) if key else None
            entry = counts.setdefault(None if value is None else str(value), [0, 0])
            entry[0] += 1
            entry[1] += record.status == "passed"
        rows: list[Any] = [(value, n, ok) for value, (n, ok) in counts.items()]
    else:
        run, mark, ts, table, _ = sql
        if browse.text is not None:
            await _index_text(store)
        summed: dict[Any, list[int]] = {}
        # the rollup's own columns and metadata keys: whole hours from their counts (`stores._rollup`,
        # `stores._rollup_meta`)
        rolls = column in _ROLLED or key is not None
        for part, rolled in await parts(store, browse, key) if rolls else [(browse, None)]:
            if rolled is not None:
                condition, args = _rollup.where(part, rolled, mark)
                if column:
                    counted, source = _ROLLED[column], _rollup.rollup_table(table)
                else:
                    counted, source = "value", _rollup_meta.meta_table(table)
                    condition, args = f"key = {mark} AND {condition}", [key, *args]
                query = (f"SELECT {counted}, SUM(n), SUM(CASE WHEN status = 'passed' THEN n ELSE 0 END) FROM {source} "
                         f"WHERE {condition} GROUP BY 1")
            else:
                condition, args = part.sql(mark, ts)
                expression, bound = (column, []) if column else meta_sql(mark, key or "")
                query = (f"SELECT {expression}, COUNT(*), SUM(CASE WHEN status = 'passed' THEN 1 ELSE 0 END) "
                         f"FROM {table} WHERE {condition} GROUP BY 1")
                args = [*bound, *args]
            for value, n, ok in await run(query, args):
                value = _rollup.unkey(value) if rolled is not None and column != "evaluator" else value
                entry = summed.setdefault(value, [0, 0])
                entry[0] += int(n)
                entry[1] += int(ok or 0)
        rows = [(value, n, ok) for value, (n, ok) in summed.items()]
    found = sorted((Segment(None if v is None else str(v), int(n), int(ok or 0)) for v, n, ok in rows),
                   key=lambda s: (-s.n, s.value is None, s.value or ""))
    return found[:LIMIT], len(found)
