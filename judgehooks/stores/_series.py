"""The overview's series over time, counted in the store: each evaluator's verdicts and passes per
bucket (`pass_rates`), and the runs' latency and cost per bucket, each run once (`run_series`).
Buckets are cut from the ISO time text (its first characters), the same in SQLite, PostgreSQL and
the one pass over a store without SQL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from . import _rollup
from ._base import Store
from ._browse import Browse, _records, _sql
from ._rollup_read import parts
from ._textsearch import index_text as _index_text

Bucket = Literal["minute", "10min", "hour", "day", "month"]
#: how a bucket is cut from the ISO time text, in both SQL dialects: its first characters
#: ("2026-11-30T12:3" is the 10 minutes from 12:30)
CUTS: dict[str, int] = {"minute": 16, "10min": 15, "hour": 13, "day": 10, "month": 7}
_PG_TEXT = """to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI')"""
#: what completes a cut into a whole minute
_FILL = "2000-01-01T00:00"

async def pass_rates(store: Store, browse: Browse, bucket: Bucket) -> list[tuple[str, str | None, datetime, int, int]]:
    """(evaluator, version, bucket start, verdicts, passed) per `bucket` of time, verdicts only."""
    browse = browse.replace(judged=True)
    sql = _sql(store)
    if sql is None:
        counts: dict[tuple[str, str | None, str], list[int]] = {}
        async for record in _records(store, browse):
            cut = record.created_at.astimezone(UTC).isoformat()[:CUTS[bucket]]
            entry = counts.setdefault((record.evaluator, record.evaluator_version, cut), [0, 0])
            entry[0] += 1
            entry[1] += record.status == "passed"
        rows: Sequence[Sequence[Any]] = [(*key, n, ok) for key, (n, ok) in counts.items()]
    else:
        run, mark, ts, table, _ = sql
        if browse.text is not None:
            await _index_text(store)
        summed: dict[tuple[str, str | None, str], list[int]] = {}
        for part, rolled in await _parts(store, browse, bucket):
            if rolled is not None:  # whole hours: the rollup's
                condition, args = _rollup.where(part, rolled, mark)
                query = (f"SELECT evaluator, version, substr(hour, 1, {CUTS[bucket]}), SUM(n), SUM(CASE WHEN status = "
                         f"'passed' THEN n ELSE 0 END) FROM {_rollup.rollup_table(table)} WHERE {condition} "
                         "GROUP BY 1, 2, 3")
            else:
                condition, args = part.sql(mark, ts)
                cut = f"substr({_PG_TEXT if mark == '%s' else 'created_at'}, 1, {CUTS[bucket]})"
                query = (f"SELECT evaluator, evaluator_version, {cut}, COUNT(*), "
                         f"SUM(CASE WHEN status = 'passed' THEN 1 ELSE 0 END) FROM {table} WHERE {condition} "
                         "GROUP BY 1, 2, 3")
            for evaluator, version, cut, n, ok in await run(query, args):
                entry = summed.setdefault((evaluator, _rollup.unkey(version) if rolled else version, cut), [0, 0])
                entry[0] += int(n)
                entry[1] += int(ok or 0)
        rows = [(*key, n, ok) for key, (n, ok) in summed.items()]
    return sorted(((str(e), v, datetime.fromisoformat(f"{cut}{_FILL[len(cut):]}:00+00:00"), int(n), int(ok or 0))
                   for e, v, cut, n, ok in rows), key=lambda row: (row[0], row[1] is not None, row[1] or "", row[2]))


async def run_series(store: Store, browse: Browse, bucket: Bucket
                     ) -> list[tuple[datetime, int, float | None, float | None, float | None]]:
    """Per `bucket` of time: (start, runs, the runs' mean latency in ms, their cost, the judges'
    cost), each run counted once in each hour it has records in (in each minute or 10 minutes, when
    the buckets are those), however many evaluators graded it (its figures are the same on each of
    its records). Records without a run id (offline grades) are left out."""
    width = CUTS[bucket]
    within = max(width, _rollup.HOUR)  # a run counts once per hour, or per bucket when that is narrower
    #: per bucket: runs, latency sum, latencies, cost sum, costs, judges' cost sum, judges' costs
    per: dict[str, list[float]] = {}

    def add(cut: str, *values: Any) -> None:
        total = per.setdefault(cut[:width], [0] * 7)
        for i, value in enumerate(values):
            total[i] += value or 0

    sql = _sql(store)
    if sql is None:
        runs: dict[tuple[str, str], list[Any]] = {}
        async for record in _records(store, browse):
            if record.run_id is None:
                continue
            cut = record.created_at.astimezone(UTC).isoformat()[:within]
            entry = runs.setdefault((cut, record.run_id), [record.run_latency_ms, record.run_cost_usd, 0.0, 0])
            if record.cost_usd is not None:
                entry[2] += record.cost_usd
                entry[3] += 1
        for (cut, _), (latency, cost, judged, judged_n) in runs.items():
            add(cut, 1, latency, latency is not None, cost, cost is not None, judged, judged_n)
    else:
        run, mark, ts, table, _ = sql
        if browse.text is not None:
            await _index_text(store)
        whole = browse.where.evaluator is None and browse.version is None  # the rollup's runs are the runs' own
        for part, rolled in await _parts(store, browse, bucket) if whole else [(browse, None)]:
            if rolled is not None:
                condition, args = _rollup.where(part, rolled, mark)
                query = (f"SELECT substr(hour, 1, {width}), SUM(runs), SUM(run_latency), SUM(run_latency_n), "
                         f"SUM(run_cost), SUM(run_cost_n), SUM(judged), SUM(judged_n) "
                         f"FROM {_rollup.rollup_table(table)} WHERE {condition} GROUP BY 1 HAVING SUM(runs) > 0")
            else:
                condition, args = part.sql(mark, ts)
                cut = f"substr({_PG_TEXT if mark == '%s' else 'created_at'}, 1, {within})"
                where = f"{condition} AND run_id IS NOT NULL" if condition else "run_id IS NOT NULL"
                if part.unfolded is not None:  # past the rollup's reach: a run it counted in that hour is not new
                    hour = f"substr({_PG_TEXT if mark == '%s' else 'created_at'}, 1, {_rollup.HOUR})"
                    where += (f" AND NOT EXISTS (SELECT 1 FROM {_rollup.rollup_table(table)}_runs s "
                              f"WHERE s.run_id = {table}.run_id AND s.hour = {hour})")
                query = ("SELECT cut, COUNT(*), SUM(latency), COUNT(latency), SUM(cost), COUNT(cost), SUM(judged), "
                         f"SUM(judged_n) FROM (SELECT {cut} AS cut, MAX(run_latency_ms) AS latency, "
                         "MAX(run_cost_usd) AS cost, SUM(cost_usd) AS judged, COUNT(cost_usd) AS judged_n "
                         f"FROM {table} WHERE {where} GROUP BY 1, run_id) AS runs GROUP BY cut")
            for cut, *values in await run(query, args):
                add(cut, *(float(v) if v is not None else 0 for v in values))
    return sorted((datetime.fromisoformat(f"{cut}{_FILL[len(cut):]}:00+00:00"), int(runs),
                   latency / timed if timed else None, cost if costed else None, judged if judged_n else None)
                  for cut, (runs, latency, timed, cost, costed, judged, judged_n) in per.items())


async def _parts(store: Store, browse: Browse, bucket: Bucket) -> list[tuple[Browse, Any]]:
    """`stores._browse.parts`, for buckets of an hour or more (narrower ones are cut from the records)."""
    return await parts(store, browse) if CUTS[bucket] <= _rollup.HOUR else [(browse, None)]
