"""The charts, drawn on the server (the pass rate over time; two sides' score histograms): numbers
only (coordinates and labels) that the template writes into an SVG element, so no record byte is
ever markup and no script draws it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

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


@dataclass
class Chart:
    """One evaluator's pass rate per bucket, with where each of its versions first appears."""

    evaluator: str
    points: list[Point] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)  # x axis: position, text
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
    def grid(self) -> list[tuple[float, str]]:
        """The y axis: position and text of 0, 50 and 100%."""
        return [(self._y(rate), f"{int(rate * 100)}%") for rate in (0.0, 0.5, 1.0)]

    def _y(self, rate: float) -> float:
        return self.bottom - rate * (self.bottom - self.top)


def chart(evaluator: str, buckets: list[tuple[datetime, int, int]], versions: list[tuple[datetime, str]],
          step: timedelta, fmt: str) -> Chart:
    """`buckets`: (start, verdicts, passed), oldest first; `versions`: (first seen, version), drawn
    as markers when there are several; `step`: the bucket width; `fmt`: strftime for the ticks."""
    drawn = Chart(evaluator)
    if not buckets:
        return drawn
    start, end = buckets[0][0], buckets[-1][0] + step
    span = (end - start).total_seconds() or 1.0

    def x(moment: datetime) -> float:
        offset = min(max((moment - start).total_seconds(), 0.0), span)
        return drawn.left + offset / span * (drawn.right - drawn.left)

    for moment, n, passed in buckets:
        rate = passed / n if n else 0.0
        drawn.points.append(Point(x(moment + step / 2), drawn._y(rate),
                                  f"{moment.strftime(fmt)}: {100 * rate:.0f}% passed ({passed} of {n})"))
    if len(versions) > 1:
        drawn.markers = [Marker(x(moment), version[:12]) for moment, version in versions]
    count = min(len(buckets), 6)
    for i in range(count):
        moment = start + (end - start) * (i / max(count - 1, 1))
        drawn.ticks.append((x(moment), moment.strftime(fmt)))
    return drawn


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    side: str  # "a" or "b": the CSS class that colours it
    label: str  # the tooltip: side, bucket, share, count


@dataclass
class Histogram:
    """Two sides' score histograms on one axis, each bucket a pair of bars: the share of that side's
    scores in the bucket (the sides may hold different numbers of verdicts)."""

    bars: list[Bar] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)  # x axis: bucket centre, text
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM
    peak: float = 1.0  # the share at the top of the y axis: the largest bar's, rounded up to 10%

    @property
    def grid(self) -> list[tuple[float, str]]:
        return [(self._y(share), f"{round(share * 100)}%") for share in (0.0, self.peak / 2, self.peak)]

    def _y(self, share: float) -> float:
        return self.bottom - share / self.peak * (self.bottom - self.top)


def histogram(labels: list[str], a: list[int], b: list[int], names: tuple[str, str]) -> Histogram:
    """`labels`: the buckets' names; `a`, `b`: each side's count per bucket; `names`: the sides' names
    for the tooltips (text, escaped by the template like every other)."""
    drawn = Histogram()
    if not labels:
        return drawn
    slot = (drawn.right - drawn.left) / len(labels)
    bar = slot * 0.4
    totals = (sum(a) or 1, sum(b) or 1)
    drawn.peak = max(math.ceil(10 * max(*(n / totals[0] for n in a), *(n / totals[1] for n in b)) - 1e-9) / 10, 0.1)
    for i, text in enumerate(labels):
        centre = drawn.left + slot * (i + 0.5)
        for j, (side, counts) in enumerate((("a", a), ("b", b))):
            share = counts[i] / totals[j]
            y = drawn._y(share)
            drawn.bars.append(Bar(centre - bar + j * bar, y, bar, drawn.bottom - y, side,
                                  f"{names[j]}, score {text}: {100 * share:.0f}% ({counts[i]} of {sum(counts)})"))
        drawn.ticks.append((centre, text))
    return drawn
