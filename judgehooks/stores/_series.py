"""The overview's series over time, counted in the store: each evaluator's verdicts and passes per
bucket (`pass_rates`), and the runs' latency and cost per bucket, each run once (`run_series`).
Buckets are cut from the ISO time text (its first characters), the same in SQLite, PostgreSQL and
the one pass over a store without SQL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from ._base import Store
from ._browse import Browse, _index_text, _records, _sql

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
        condition, args = browse.sql(mark, ts)
        cut = f"substr({_PG_TEXT if mark == '%s' else 'created_at'}, 1, {CUTS[bucket]})"
        rows = await run(f"SELECT evaluator, evaluator_version, {cut}, COUNT(*), "
                         f"SUM(CASE WHEN status = 'passed' THEN 1 ELSE 0 END) FROM {table} WHERE {condition} "
                         "GROUP BY 1, 2, 3", args)
    return sorted((str(e), v, datetime.fromisoformat(f"{cut}{_FILL[len(cut):]}:00+00:00"), int(n), int(ok or 0))
                  for e, v, cut, n, ok in rows)


async def run_series(store: Store, browse: Browse, bucket: Bucket
                     ) -> list[tuple[datetime, int, float | None, float | None, float | None]]:
    """Per `bucket` of time: (start, runs, the runs' mean latency in ms, their cost, the judges'
    cost), each run counted once however many evaluators graded it (its figures are the same on
    each of its records). Records without a run id (offline grades) are left out."""
    sql = _sql(store)
    if sql is None:
        runs: dict[tuple[str, str], list[Any]] = {}
        async for record in _records(store, browse):
            if record.run_id is None:
                continue
            cut = record.created_at.astimezone(UTC).isoformat()[:CUTS[bucket]]
            entry = runs.setdefault((cut, record.run_id), [record.run_latency_ms, record.run_cost_usd, None])
            if record.cost_usd is not None:
                entry[2] = (entry[2] or 0.0) + record.cost_usd
        per: dict[str, list[Any]] = {}
        for (cut, _), (latency, cost, judged) in runs.items():
            total = per.setdefault(cut, [0, [], None, None])
            total[0] += 1
            if latency is not None:
                total[1].append(latency)
            total[2] = total[2] if cost is None else (total[2] or 0.0) + cost
            total[3] = total[3] if judged is None else (total[3] or 0.0) + judged
        rows: Sequence[Sequence[Any]] = [(cut, n, sum(lat) / len(lat) if lat else None, cost, judged)
                                         for cut, (n, lat, cost, judged) in per.items()]
    else:
        run, mark, ts, table, _ = sql
        if browse.text is not None:
            await _index_text(store)
        condition, args = browse.sql(mark, ts)
        cut = f"substr({_PG_TEXT if mark == '%s' else 'created_at'}, 1, {CUTS[bucket]})"
        where = f"{condition} AND run_id IS NOT NULL" if condition else "run_id IS NOT NULL"
        rows = await run(f"SELECT cut, COUNT(*), AVG(latency), SUM(cost), SUM(judged) FROM (SELECT {cut} AS cut, "
                         "MAX(run_latency_ms) AS latency, MAX(run_cost_usd) AS cost, SUM(cost_usd) AS judged "
                         f"FROM {table} WHERE {where} GROUP BY 1, run_id) AS runs GROUP BY cut", args)
    return sorted((datetime.fromisoformat(f"{cut}{_FILL[len(cut):]}:00+00:00"), int(n),
                   None if lat is None else float(lat), None if cost is None else float(cost),
                   None if judged is None else float(judged)) for cut, n, lat, cost, judged in rows)
