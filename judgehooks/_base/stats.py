"""Small statistics every page and report shares."""

from __future__ import annotations

import math


def wilson(successes: int, n: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval of a rate `successes / n`; None when `n` is 0. It
    stays within [0, 1] and is sound for small `n` and rates near 0 or 1, where the normal one is not."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"wilson needs 0 <= successes <= n, got successes={successes}, n={n}")
    z = 1.959963984540054  # the normal quantile of a two-sided 95% interval
    rate = successes / n
    centre = rate + z * z / (2 * n)
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    low, high = (centre - half) / scale, (centre + half) / scale
    # exactly 0 at no successes and 1 at all (the formula's, which rounding may miss by an ulp)
    return 0.0 if successes == 0 else max(0.0, low), 1.0 if successes == n else min(1.0, high)
