"""The charts, drawn on the server: each evaluator's pass rate over time, a value over time (a
latency, a cost), and two sides' score histograms. Numbers only (coordinates and labels) that the
template writes into an SVG element, so no record byte is ever markup and no script draws it. Each
bucket's pass rate has its 95% interval (Wilson) drawn as a band, and every chart is also a table
of the same numbers (`Chart.rows`), for screen readers and for copying."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .._base.stats import wilson

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 64, 36, 12, 28  # room for "1096 ms" at the left and a centred time at the right


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str  # the tooltip: bucket, pass rate, counts


@dataclass(frozen=True)
class Marker:
    x: float
    version: str


@dataclass(kw_only=True)
class Frame:
    """The SVG frame every chart is drawn in: its size, the plot area's edges, and the x axis."""

    ticks: list[tuple[float, str]] = field(default_factory=list)  # x axis: position, text
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


@dataclass
class Chart(Frame):
    """One evaluator's pass rate per bucket, with where each of its versions first appears."""

    evaluator: str
    points: list[Point] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    band: list[tuple[float, float]] = field(default_factory=list)  # the interval: upper edge, then lower back
    columns: list[str] = field(default_factory=list)  # the chart as a table: its head, and a row per bucket
    rows: list[list[str]] = field(default_factory=list)
    top_value: float = 1.0  # the value at the top of the y axis
    unit: str = "%"

    @property
    def path(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)

    @property
    def band_path(self) -> str:
        return " ".join(f"{x:.1f},{y:.1f}" for x, y in self.band)

    @property
    def grid(self) -> list[tuple[float, str]]:
        """The y axis: position and text of 0, the middle and the top (0, 50 and 100% for a rate)."""
        if self.unit == "%":
            return [(self._y(rate), f"{int(rate * 100)}%") for rate in (0.0, 0.5, 1.0)]
        return [(self._y(v), f"{_figure(v)} {self.unit}") for v in (0.0, self.top_value / 2, self.top_value)]

    def _y(self, value: float) -> float:
        return self.bottom - value / (self.top_value or 1.0) * (self.bottom - self.top)


def _figure(value: float) -> str:
    return f"{value:.0f}" if value >= 100 or value == 0 else f"{value:.3g}"


def chart(evaluator: str, buckets: list[tuple[datetime, int, int]], versions: list[tuple[datetime, str]],
          step: timedelta, fmt: str, within: tuple[datetime, datetime] | None = None) -> Chart:
    """`buckets`: (start, verdicts, passed), oldest first; `versions`: (first seen, version), drawn
    as markers when there are several; `step`: the bucket width; `fmt`: strftime for the ticks;
    `within`: the time range chosen (the x axis spans it, and the buckets outside it if any)."""
    drawn = Chart(evaluator, columns=["verdicts", "passed", "pass %", "95% interval"])
    if not buckets:
        return drawn
    x = _axis(drawn, [moment for moment, *_ in buckets], step, fmt, within)
    lower = []
    for moment, n, passed in buckets:
        rate = passed / n if n else 0.0
        low, high = wilson(passed, n) or (0.0, 1.0)
        middle = x(moment + step / 2)
        drawn.points.append(Point(middle, drawn._y(rate), f"{moment.strftime(fmt)}: {100 * rate:.0f}% passed "
                                  f"({passed} of {n}; 95% interval {100 * low:.0f}-{100 * high:.0f}%)"))
        drawn.band.append((middle, drawn._y(high)))
        lower.append((middle, drawn._y(low)))
        drawn.rows.append([moment.strftime(fmt), str(n), str(passed), f"{100 * rate:.1f}%",
                           f"{100 * low:.1f}% – {100 * high:.1f}%"])
    drawn.band += reversed(lower)
    if len(versions) > 1:
        drawn.markers = [Marker(x(moment), version[:12]) for moment, version in versions]
    return drawn


def value_chart(title: str, buckets: list[tuple[datetime, int, float | None]], step: timedelta, fmt: str,
                unit: str, within: tuple[datetime, datetime] | None = None) -> Chart:
    """A value per bucket (a mean latency, a cost), from 0 to its largest: `buckets` are (start,
    runs, value), oldest first; buckets without a value are left out of the line."""
    valued = [(m, n, v) for m, n, v in buckets if v is not None]
    drawn = Chart(title, columns=["runs", unit], top_value=max((v for *_, v in valued), default=0.0) or 1.0,
                  unit=unit)
    if not valued:
        return drawn
    x = _axis(drawn, [moment for moment, *_ in valued], step, fmt, within)
    for moment, n, value in valued:
        drawn.points.append(Point(x(moment + step / 2), drawn._y(value),
                                  f"{moment.strftime(fmt)}: {_figure(value)} {unit} ({n} runs)"))
        drawn.rows.append([moment.strftime(fmt), str(n), f"{value:.6g}"])
    return drawn


def _axis(drawn: Chart, starts: list[datetime], step: timedelta, fmt: str,
          within: tuple[datetime, datetime] | None) -> Callable[[datetime], float]:
    """The x axis over the buckets (and the range chosen): its ticks, and where a moment falls."""
    start, end = starts[0], starts[-1] + step
    if within is not None:
        start, end = min(start, within[0]), max(end, within[1])
    span = (end - start).total_seconds() or 1.0

    def x(moment: datetime) -> float:
        offset = min(max((moment - start).total_seconds(), 0.0), span)
        return drawn.left + offset / span * (drawn.right - drawn.left)

    count = 6 if within is not None else min(len(starts), 6)  # a chosen range is marked across
    for i in range(count):
        moment = start + (end - start) * (i / max(count - 1, 1))
        drawn.ticks.append((x(moment), moment.strftime(fmt)))
    return x


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    side: str  # "a" or "b": the CSS class that colours it
    label: str  # the tooltip: side, bucket, share, count


@dataclass
class Histogram(Frame):
    """Two sides' score histograms on one axis (or one side's), each bucket a pair of bars: the share
    of that side's scores in the bucket (the sides may hold different numbers of verdicts)."""

    bars: list[Bar] = field(default_factory=list)
    peak: float = 1.0  # the share at the top of the y axis: the largest bar's, rounded up to 10%

    @property
    def grid(self) -> list[tuple[float, str]]:
        return [(self._y(share), f"{round(share * 100)}%") for share in (0.0, self.peak / 2, self.peak)]

    def _y(self, share: float) -> float:
        return self.bottom - share / self.peak * (self.bottom - self.top)


def histogram(labels: list[str], a: list[int], b: list[int] | None, names: tuple[str, ...]) -> Histogram:
    """`labels`: the buckets' names; `a`, `b`: each side's count per bucket (`b` None: one side, its
    bars twice as wide); `names`: the sides' names for the tooltips (text, escaped by the template
    like every other)."""
    drawn = Histogram()
    if not labels:
        return drawn
    sides = [("a", a)] if b is None else [("a", a), ("b", b)]
    slot = (drawn.right - drawn.left) / len(labels)
    bar = slot * 0.8 / len(sides)
    totals = [sum(counts) or 1 for _, counts in sides]
    drawn.peak = max(math.ceil(10 * max(n / totals[j] for j, (_, counts) in enumerate(sides) for n in counts)
                               - 1e-9) / 10, 0.1)
    for i, text in enumerate(labels):
        centre = drawn.left + slot * (i + 0.5)
        for j, (side, counts) in enumerate(sides):
            share = counts[i] / totals[j]
            y = drawn._y(share)
            drawn.bars.append(Bar(centre - slot * 0.4 + j * bar, y, bar, drawn.bottom - y, side,
                                  f"{names[j]}, score {text}: {100 * share:.0f}% ({counts[i]} of {sum(counts)})"))
        drawn.ticks.append((centre, text))
    return drawn
