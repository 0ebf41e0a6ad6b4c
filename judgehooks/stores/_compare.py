"""Reading a store to compare two sides of it (the ``/compare`` page): two versions of one evaluator,
two agents or two time windows, each side a `Browse`. Per side its verdict counts and its numeric
scores per bucket, and the runs both sides judged whose verdict changed. SQLite and PostgreSQL
answer each in one aggregate query (the changed verdicts in one join), so no record is loaded to be
counted; any other store gets the same answer from one pass over each side's records."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import _rollup
from ._base import Store
from ._browse import _COUNTS as _STATUS
from ._browse import Browse, _moment, _records, _sql
from ._rollup_read import ROLLED_STATUS as _ROLLED_STATUS
from ._rollup_read import parts

#: scores past this size are left out of the histograms (an infinity or a typo would flatten every bucket)
SCORE_LIMIT = 1e15
#: integer scores spanning at most this many values get a bucket each; others are cut into `BUCKETS`
MAX_INTEGER_BUCKETS = 20
BUCKETS = 10
_SCORED = f"score IS NOT NULL AND score >= {-SCORE_LIMIT:.0f} AND score <= {SCORE_LIMIT:.0f}"

@dataclass(frozen=True, slots=True)
class Counts:
    """One side's records by status (re-judgements left out)."""

    n: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0

    @property
    def verdicts(self) -> int:
        return self.passed + self.failed


@dataclass(frozen=True, slots=True)
class Buckets:
    """Where the score histograms' buckets lie: `count` of them, `width` wide, from `low`; the last
    one holds its upper edge too. ``whole``: one bucket per whole-number score."""

    low: float
    width: float
    count: int
    whole: bool

    def index(self, score: float) -> int:
        return min(max(math.floor((score - self.low) / self.width), 0), self.count - 1)

    def labels(self) -> list[str]:
        if self.whole:
            return [f"{self.low + i:g}" for i in range(self.count)]
        edges = [self.low + i * self.width for i in range(self.count + 1)]
        return [f"{edges[i]:.3g}–{edges[i + 1]:.3g}" for i in range(self.count)]


@dataclass(frozen=True, slots=True)
class Change:
    """A run both sides judged (by one evaluator) with different verdicts: each side's record."""

    run_id: str
    evaluator: str
    a_id: str
    a_status: str
    a_at: datetime | None
    b_id: str
    b_status: str
    b_at: datetime | None


@dataclass(frozen=True, slots=True)
class Overlap:
    """The runs both sides judged: how many (record pairs of one run and evaluator), how many of them
    changed verdict and which way, and the newest `changes`."""

    both: int = 0
    changed: int = 0
    to_failed: int = 0
    to_passed: int = 0
    changes: list[Change] = field(default_factory=list)


async def counts(store: Store, side: Browse) -> Counts:
    """`side`'s records by status, re-judgements left out."""
    side = side.replace(where=side.where.replace(status=None))
    sql = _sql(store)
    if sql is None:
        tally = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
        async for record in _records(store, side):
            if record.rejudge_of is None:
                tally[record.status] += 1
        return Counts(sum(tally.values()), **tally)
    run, mark, ts, table, _ = sql
    total = [0] * 5
    for part, rolled in await parts(store, side):
        if rolled is not None:  # whole hours: the rollup's
            condition, args = _rollup.where(part, rolled, mark)
            query = (f"SELECT SUM(n), {_ROLLED_STATUS} FROM {_rollup.rollup_table(table)} WHERE {condition} "
                     "AND rejudge = 0")
        else:
            condition, args = part.sql(mark, ts)
            query = f"SELECT {_STATUS} FROM {table} WHERE {condition + ' AND ' if condition else ''}rejudge_of IS NULL"
        total = [have + int(more or 0) for have, more in zip(total, (await run(query, args))[0], strict=True)]
    return Counts(*total)


async def buckets(store: Store, sides: Sequence[Browse]) -> Buckets | None:
    """Buckets that hold every verdict's score of every side (so the histograms line up), or None
    when no verdict of theirs has a score."""
    sides = [side.replace(judged=True) for side in sides]
    sql = _sql(store)
    if sql is None:
        scores = [r.score for side in sides async for r in _records(store, side) if _scored(r.score)]
        if not scores:
            return None
        low, high, fractional = min(scores), max(scores), any(not float(s).is_integer() for s in scores)
    else:
        run, mark, ts, table, _ = sql
        found = []
        for side in sides:  # a query each, through its index (an OR of the sides reads the whole table)
            condition, args = side.sql(mark, ts)
            rows = await run(f"SELECT MIN(score), MAX(score), SUM(CASE WHEN score <> ROUND(score) THEN 1 ELSE 0 END) "
                             f"FROM {table} WHERE {_SCORED} AND {condition}", args)
            if rows[0][0] is not None:
                found.append(rows[0])
        if not found:
            return None
        low, high, fractional = min(r[0] for r in found), max(r[1] for r in found), any(r[2] for r in found)
    return _cut(float(low), float(high), bool(fractional))


def _cut(low: float, high: float, fractional: bool) -> Buckets:
    if not fractional and high - low < MAX_INTEGER_BUCKETS:
        return Buckets(low, 1.0, int(high - low) + 1, whole=True)
    return Buckets(low, (high - low) / BUCKETS or 1.0, BUCKETS, whole=False)


#: scores with at most this many values (a judge's 1-10, a check's few) are counted per value and cut here
DISTINCT = 2000


async def histograms(store: Store, sides: Sequence[Browse]) -> tuple[Buckets, list[list[int]]] | None:
    """`buckets` and each side's `histogram` in them, or None when no verdict of theirs has a score.
    A SQL store is asked once a side (each score value and its count) when the scores take at most
    `DISTINCT` values; otherwise for the buckets, then for each side's counts."""
    sql = _sql(store)
    if sql is not None:
        run, mark, ts, table, _ = sql
        values: list[dict[float, int]] = []
        for side in sides:
            condition, args = side.replace(judged=True).sql(mark, ts)
            rows = await run(f"SELECT score, COUNT(*) FROM {table} WHERE {_SCORED} AND {condition} GROUP BY 1 "
                             f"LIMIT {DISTINCT + 1}", args)
            if len(rows) > DISTINCT:
                break
            values.append({float(score): int(n) for score, n in rows})
        else:
            scores = [score for counted in values for score in counted]
            if not scores:
                return None
            cut = _cut(min(scores), max(scores), any(not score.is_integer() for score in scores))
            found = []
            for counted in values:
                counts = [0] * cut.count
                for score, n in counted.items():
                    counts[cut.index(score)] += n
                found.append(counts)
            return cut, found
    shared = await buckets(store, sides)
    if shared is None:
        return None
    return shared, [await histogram(store, side, shared) for side in sides]


async def histogram(store: Store, side: Browse, cut: Buckets) -> list[int]:
    """How many of `side`'s verdicts have a score in each bucket of `cut`."""
    side = side.replace(judged=True)
    found = [0] * cut.count
    sql = _sql(store)
    if sql is None:
        async for record in _records(store, side):
            if _scored(record.score):
                found[cut.index(float(record.score))] += 1
        return found
    run, mark, ts, table, _ = sql
    condition, args = side.sql(mark, ts)
    # floor, in each dialect (SQLite's CAST truncates, which is floor here: the score is >= low)
    index = (f"FLOOR((score - {mark}) / {mark})" if mark == "%s" else f"CAST((score - {mark}) / {mark} AS INTEGER)")
    rows = await run(f"SELECT {index}, COUNT(*) FROM {table} WHERE {_SCORED} AND {condition} GROUP BY 1",
                     [cut.low, cut.width, *args])
    for at, n in rows:
        found[min(max(int(at), 0), cut.count - 1)] += int(n)
    return found


async def changes(store: Store, a: Browse, b: Browse, *, limit: int = 100) -> Overlap:
    """The runs judged on both sides by the same evaluator, and the newest `limit` of those whose
    verdict differs (a pass on one side, a fail on the other). A record is never paired with itself."""
    a, b = a.replace(judged=True), b.replace(judged=True)
    sql = _sql(store)
    if sql is None:
        judged: dict[tuple[str, str], list[tuple[str, str, datetime]]] = {}
        async for record in _records(store, a):
            if record.run_id is not None:
                judged.setdefault((record.run_id, record.evaluator), []).append(
                    (record.id, record.status, record.created_at))
        both, found = 0, []
        async for record in _records(store, b):  # newest first
            if record.run_id is None:
                continue
            for a_id, a_status, a_at in judged.get((record.run_id, record.evaluator), []):
                if a_id != record.id:
                    both += 1
                    if a_status != record.status:
                        found.append(Change(record.run_id, record.evaluator, a_id, a_status, a_at,
                                            record.id, record.status, record.created_at))
        found.sort(key=lambda c: (c.b_at, c.b_id, c.a_id), reverse=True)
        return Overlap(both, len(found), sum(c.b_status == "failed" for c in found),
                       sum(c.b_status == "passed" for c in found), found[:limit])
    run, mark, ts, table, _ = sql
    (a_condition, a_args), (b_condition, b_args) = a.sql(mark, ts), b.sql(mark, ts)
    # Grouped by run and evaluator, never joined record to record: a join on run_id (no index)
    # walks one side once per record of the other.
    # Each side read through its own index (one OR of the two would read the whole table), a record
    # of both sides once, flagged as both.
    # Only the runs of both sides can pair: found first (each side's runs from the graded index alone),
    # so that the grouping reads their records, not every record of both sides.
    both_runs = (f"WITH both_runs AS (SELECT run_id FROM {table} WHERE run_id IS NOT NULL AND {a_condition} "
                 f"INTERSECT SELECT run_id FROM {table} WHERE run_id IS NOT NULL AND {b_condition}) ")

    def flagged(columns: str) -> str:
        return (f"SELECT {columns}, 1 AS in_a, CASE WHEN {b_condition} THEN 1 ELSE 0 END AS in_b FROM {table} "
                f"WHERE run_id IN (SELECT run_id FROM both_runs) AND {a_condition} UNION ALL SELECT {columns}, 0, 1 "
                f"FROM {table} WHERE run_id IN (SELECT run_id FROM both_runs) AND {b_condition} "
                f"AND CASE WHEN {a_condition} THEN 0 ELSE 1 END = 1")

    args = [*a_args, *b_args, *b_args, *a_args, *b_args, *a_args]
    side = "SUM(CASE WHEN in_{} = 1 AND status = '{}' THEN 1 ELSE 0 END)"
    groups = (f"SELECT {side.format('a', 'passed')} AS ap, {side.format('a', 'failed')} AS af, "
              f"{side.format('b', 'passed')} AS bp, {side.format('b', 'failed')} AS bf, "
              f"SUM(in_a * in_b) AS ab FROM ({flagged('run_id, evaluator, status')}) f GROUP BY run_id, evaluator")
    total = await run(f"{both_runs}SELECT SUM((ap + af) * (bp + bf) - ab), SUM(ap * bf + af * bp), SUM(ap * bf), "
                      f"SUM(af * bp) FROM ({groups}) g", args)
    both, changed, to_failed, to_passed = (int(v or 0) for v in total[0])
    if not changed:
        return Overlap(both, 0, 0, 0, [])
    # The newest `limit` B verdicts that differ from an A verdict of their run: every listed pair has one
    newest = await run(
        f"{both_runs}SELECT run_id, evaluator, id, status, created_at FROM (SELECT run_id, evaluator, id, status, "
        "created_at, "
        f"in_b, {side.format('a', 'passed')} OVER w AS ap, {side.format('a', 'failed')} OVER w AS af "
        f"FROM ({flagged('run_id, evaluator, id, status, created_at')}) f WINDOW w AS (PARTITION BY run_id, "
        "evaluator)) x "
        "WHERE in_b = 1 AND ((status = 'passed' AND af > 0) OR (status = 'failed' AND ap > 0)) "
        f"ORDER BY created_at DESC, id DESC LIMIT {int(limit)}", args)
    runs = sorted({row[0] for row in newest})
    olds = await run(f"SELECT run_id, evaluator, id, status, created_at FROM {table} WHERE {a_condition} "
                     f"AND run_id IN ({', '.join([mark] * len(runs))})", [*a_args, *runs])
    by_run: dict[tuple[str, str], list[tuple[str, str, datetime | None]]] = {}
    for run_id, evaluator, id, status, at in olds:
        by_run.setdefault((run_id, evaluator), []).append((id, status, _moment(at)))
    found = [Change(run_id, evaluator, a_id, a_status, a_at, b_id, b_status, _moment(b_at))
             for run_id, evaluator, b_id, b_status, b_at in newest
             for a_id, a_status, a_at in by_run.get((run_id, evaluator), []) if a_status != b_status]
    found.sort(key=lambda c: (c.b_at, c.b_id, c.a_id), reverse=True)
    return Overlap(both, changed, to_failed, to_passed, found[:limit])


def _scored(score: Any) -> bool:
    return score is not None and -SCORE_LIMIT <= score <= SCORE_LIMIT
