"""Charts the benchmark scripts write for the docs page: one SVG per table, written by hand (no
plotting library to install). Each row is a line with every repeat as a dot and its median as a
bar, so a reader sees the spread of the repeats, not only the median.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

#: where the docs page finds the charts (docs/images/benchmarks/<name>.svg)
CHARTS = Path(__file__).resolve().parents[1] / "docs" / "images" / "benchmarks"

_ROW, _LEFT, _RIGHT, _TOP, _WIDTH = 30, 330, 60, 48, 900
_COLOURS = {"judgehooks": "#1f77b4", "agno": "#d62728", "pydantic-evals": "#2ca02c"}


def _colour(label: str) -> str:
    for peer, colour in _COLOURS.items():
        if label.startswith(peer):
            return colour
    return "#555555"


def _ticks(high: float) -> list[float]:
    """About five round ticks from 0 to `high`."""
    if high <= 0:
        return [0.0]
    step = 10 ** math.floor(math.log10(high / 5))
    for factor in (1, 2, 2.5, 5, 10):
        if high / (step * factor) <= 6:
            step *= factor
            break
    return [i * step for i in range(int(high / step) + 2)]


def strip_chart(name: str, title: str, unit: str, rows: Mapping[str, Sequence[float]],
                folder: Path = CHARTS) -> Path:
    """Write ``<folder>/<name>.svg``: one line per row label, a dot per repeat, a bar at the median."""
    values = [v for series in rows.values() for v in series if math.isfinite(v)]
    ticks = _ticks(max(values, default=1.0) * 1.05)
    high = ticks[-1] or 1.0
    plot = _WIDTH - _LEFT - _RIGHT
    height = _TOP + _ROW * len(rows) + 40

    def x(value: float) -> float:
        return _LEFT + plot * max(0.0, value) / high

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
           f'viewBox="0 0 {_WIDTH} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{_WIDTH}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
           f'<text x="10" y="38" fill="#555">each dot is one repeat, the bar is their median; {escape(unit)}</text>']
    bottom = _TOP + _ROW * len(rows)
    for tick in ticks:
        out.append(f'<line x1="{x(tick):.1f}" y1="{_TOP}" x2="{x(tick):.1f}" y2="{bottom}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{x(tick):.1f}" y="{bottom + 16}" text-anchor="middle" fill="#555">{tick:g}</text>')
    for i, (label, series) in enumerate(rows.items()):
        y = _TOP + _ROW * i + _ROW / 2
        colour = _colour(label)
        short = label if len(label) <= 52 else label[:50] + "..."
        out.append(f'<text x="{_LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{escape(short)}</text>')
        finite = [v for v in series if math.isfinite(v)]
        if not finite:
            continue
        mid = statistics.median(finite)
        out.append(f'<line x1="{x(min(finite)):.1f}" y1="{y:.1f}" x2="{x(max(finite)):.1f}" y2="{y:.1f}" '
                   f'stroke="{colour}" stroke-opacity="0.4" stroke-width="2"/>')
        out.append(f'<rect x="{x(mid) - 1.5:.1f}" y="{y - 9:.1f}" width="3" height="18" fill="{colour}"/>')
        for value in finite:
            out.append(f'<circle cx="{x(value):.1f}" cy="{y:.1f}" r="4" fill="{colour}" fill-opacity="0.6"/>')
        out.append(f'<text x="{x(max(finite)) + 8:.1f}" y="{y + 4:.1f}" fill="#333">{mid:.3g}</text>')
    out.append("</svg>")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.svg"
    path.write_text("\n".join(out) + "\n")
    print(f"(chart: {path.relative_to(folder.parents[2]) if folder == CHARTS else path})", flush=True)
    return path
