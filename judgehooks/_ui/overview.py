"""What the overview draws: a row per agent, evaluator and version (`tally_row`), and the charts
over time (`draw`): each evaluator's pass rate, then the runs' mean latency, the runs' cost and the
judges' cost, in buckets that follow the range."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from ..stores._base import Store
from ..stores._browse import Browse, Tally
from ..stores._compare import histograms
from ..stores._series import Bucket, pass_rates, run_series
from .chart import Chart, Histogram, chart, histogram, value_chart

#: the overview's time buckets: width, and how its ticks are written
BUCKETS: dict[str, tuple[timedelta, str]] = {
    "minute": (timedelta(minutes=1), "%m-%d %H:%M"), "10min": (timedelta(minutes=10), "%m-%d %H:%M"),
    "hour": (timedelta(hours=1), "%m-%d %H:00"), "day": (timedelta(days=1), "%Y-%m-%d"),
    "month": (timedelta(days=30.44), "%Y-%m")}
#: the auto bucket is the widest that cuts the range into at least this many (never one dot for an hour)
MIN_BUCKETS = 12


def bucket_for(asked: str, within: tuple[datetime, datetime] | None) -> Bucket:
    """The bucket asked for, or (auto) the widest that still cuts the range into `MIN_BUCKETS`."""
    if asked != "auto":
        return cast(Bucket, asked)
    span = within[1] - within[0] if within is not None else timedelta(0)
    widest: tuple[Bucket, ...] = ("month", "day", "hour", "10min")
    for name in widest:
        if span >= BUCKETS[name][0] * MIN_BUCKETS:
            return name
    return "minute"


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def tally_row(tally: Tally) -> dict[str, Any]:
    evaluator, version, agent_id, team_id = tally.key
    agent, team = tally.names
    target = (f"team {team or team_id}" if team_id else f"agent {agent or agent_id}" if agent_id else "offline")
    return {"target": target, "agent_id": agent_id, "team_id": team_id, "evaluator": evaluator, "version": version,
            "n": tally.n, "passed": tally.passed, "failed": tally.failed, "error": tally.error,
            "skipped": tally.skipped, "pass_rate": _rate(tally.passed, tally.passed + tally.failed),
            "error_rate": _rate(tally.error, tally.n), "latency_ms": tally.latency_ms / tally.timed if tally.timed
            else None, "cost_usd": tally.cost_usd, "first": tally.first}


async def draw(store: Store, browse: Browse, groups: list[Tally], asked: str, since: datetime | None
               ) -> tuple[Bucket, list[Chart], list[tuple[Chart, str]]]:
    """The bucket (`asked`, or auto for the range chosen with `since`, else the records' own), the
    pass-rate charts and the runs' and judges' charts, each with its title."""
    firsts = [t.first for t in groups if t.first]
    lasts = [t.last for t in groups if t.last]
    # the range chosen (since, until now), else the records' own
    within = (since, datetime.now(UTC)) if since is not None else (min(firsts), max(lasts)) if firsts else None
    bucket = bucket_for(asked, within)
    step, fmt = BUCKETS[bucket]
    series: dict[str, dict[Any, list[int]]] = {}
    for name, _, start, n, passed in await pass_rates(store, browse, bucket) if groups else []:
        counts = series.setdefault(name, {}).setdefault(start, [0, 0])
        counts[0] += n
        counts[1] += passed
    charts = []
    for name in sorted(series):
        versions: dict[str, Any] = {}
        for t in groups:
            if t.key[0] == name and t.first and t.passed + t.failed:
                version = t.key[1] or "unversioned"
                versions[version] = min(versions.get(version, t.first), t.first)
        buckets = [(start, n, ok) for start, (n, ok) in sorted(series[name].items())]
        charts.append(chart(name, buckets, sorted((m, v) for v, m in versions.items()), step, fmt,
                            within if since is not None else None))
    series_of_runs = await run_series(store, browse, bucket) if groups else []
    run_charts = []
    figures = {"Runs: mean latency": ("ms", [(start, n, lat) for start, n, lat, _, _ in series_of_runs]),
               "Runs: cost": ("$", [(start, n, cost) for start, n, _, cost, _ in series_of_runs]),
               "Judges: cost": ("$", [(start, n, judged) for start, n, _, _, judged in series_of_runs])}
    for title, (unit, points) in figures.items():
        if any(value is not None for *_, value in points):
            run_charts.append((value_chart(title, points, step, fmt, unit, within if since is not None else None),
                               title))
    return bucket, charts, run_charts


async def scores(store: Store, browse: Browse, groups: list[Tally]) -> dict[str, Any] | None:
    """The overview filtered to one evaluator: its numeric scores as a histogram, the newest two of
    its versions side by side (or its one version); None when it gave no numeric score."""
    evaluator = browse.where.evaluator
    if evaluator is None:
        return None
    firsts: dict[str, datetime] = {}
    for tally in groups:
        if tally.key[0] == evaluator and tally.first:
            version = tally.key[1] or ""
            firsts[version] = min(firsts.get(version, tally.first), tally.first)
    versions = sorted(firsts, key=lambda v: firsts[v])[-2:]
    if not versions:
        return None
    sides = [Browse(browse.where, version=v or None) for v in versions]
    counted = await histograms(store, sides)
    if counted is None:
        return None
    cut, counts = counted
    names = tuple(v or "unversioned" for v in versions)
    labels = cut.labels()
    drawn: Histogram = histogram(labels, counts[0], counts[1] if len(counts) > 1 else None, names)
    rows = [[text, *(f"{c[i]} ({100 * c[i] / (sum(c) or 1):.0f}%)" for c in counts)] for i, text in enumerate(labels)]
    return {"evaluator": evaluator, "names": names, "chart": drawn, "rows": rows}
