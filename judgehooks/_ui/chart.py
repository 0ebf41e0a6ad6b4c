"""The pass-rate-over-time chart, drawn on the server: numbers only (coordinates and labels) that
the template writes into an SVG element, so no record byte is ever markup and no script draws it.
Each bucket's pass rate has its 95% interval (Wilson) drawn as a band, and every chart is also a
table of the same numbers (`Chart.rows`), for screen readers and for copying."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .._base.stats import wilson

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 12, 28


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str  # the tooltip: bucket, pass rate, counts


@dataclass(frozen=True)
class Marker:
    x: float
    version: str


@dataclass(frozen=True)
class Row:
    """One bucket as the chart's table shows it."""

    bucket: str
    n: int
    passed: int
    rate: float
    low: float
    high: float


@dataclass
class Chart:
    """One evaluator's pass rate per bucket, with where each of its versions first appears."""

    evaluator: str
    points: list[Point] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)  # x axis: position, text
    band: list[tuple[float, float]] = field(default_factory=list)  # the interval: upper edge, then lower back
    rows: list[Row] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM

    @property
    def path(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)

    @property
    def band_path(self) -> str:
        return " ".join(f"{x:.1f},{y:.1f}" for x, y in self.band)

    @property
    def grid(self) -> list[tuple[float, str]]:
        """The y axis: position and text of 0, 50 and 100%."""
        return [(self._y(rate), f"{int(rate * 100)}%") for rate in (0.0, 0.5, 1.0)]

    def _y(self, rate: float) -> float:
        return self.bottom - rate * (self.bottom - self.top)


def chart(evaluator: str, buckets: list[tuple[datetime, int, int]], versions: list[tuple[datetime, str]],
          step: timedelta, fmt: str, within: tuple[datetime, datetime] | None = None) -> Chart:
    """`buckets`: (start, verdicts, passed), oldest first; `versions`: (first seen, version), drawn
    as markers when there are several; `step`: the bucket width; `fmt`: strftime for the ticks;
    `within`: the time range chosen (the x axis spans it, and the buckets outside it if any)."""
    drawn = Chart(evaluator)
    if not buckets:
        return drawn
    start, end = buckets[0][0], buckets[-1][0] + step
    if within is not None:
        start, end = min(start, within[0]), max(end, within[1])
    span = (end - start).total_seconds() or 1.0

    def x(moment: datetime) -> float:
        offset = min(max((moment - start).total_seconds(), 0.0), span)
        return drawn.left + offset / span * (drawn.right - drawn.left)

    lower = []
    for moment, n, passed in buckets:
        rate = passed / n if n else 0.0
        low, high = wilson(passed, n) or (0.0, 1.0)
        middle = x(moment + step / 2)
        drawn.points.append(Point(middle, drawn._y(rate), f"{moment.strftime(fmt)}: {100 * rate:.0f}% passed "
                                  f"({passed} of {n}; 95% interval {100 * low:.0f}-{100 * high:.0f}%)"))
        drawn.band.append((middle, drawn._y(high)))
        lower.append((middle, drawn._y(low)))
        drawn.rows.append(Row(moment.strftime(fmt), n, passed, rate, low, high))
    drawn.band += reversed(lower)
    if len(versions) > 1:
        drawn.markers = [Marker(x(moment), version[:12]) for moment, version in versions]
    count = 6 if within is not None else min(len(buckets), 6)  # a chosen range is marked across
    for i in range(count):
        moment = start + (end - start) * (i / max(count - 1, 1))
        drawn.ticks.append((x(moment), moment.strftime(fmt)))
    return drawn
