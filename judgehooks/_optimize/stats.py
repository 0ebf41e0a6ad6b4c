"""Whether a held-out comparison says anything: an exact McNemar (sign) test on the cases whose
verdict changed between the old and the new text, and a floor on how many cases were compared."""

from __future__ import annotations

import math
from collections.abc import Sequence

#: fewer held-out cases than this and the result says it is too small to conclude
MIN_HOLDOUT = 10
#: the two-sided p-value below which a change counts as real
ALPHA = 0.05


def sign_test(fixed: int, broken: int) -> float:
    """The two-sided exact p-value of `fixed` against `broken` discordant pairs under no change."""
    n = fixed + broken
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(fixed, broken) + 1)) / 2.0 ** n
    return float(min(1.0, 2 * tail))


def compare(before: Sequence[bool | None], after: Sequence[bool | None]) -> tuple[int, int, int, float]:
    """(cases compared, fixed, broken, p-value) over the cases graded both times (None: not graded)."""
    pairs = [(b, a) for b, a in zip(before, after, strict=True) if b is not None and a is not None]
    fixed = sum(1 for b, a in pairs if not b and a)
    broken = sum(1 for b, a in pairs if b and not a)
    return len(pairs), fixed, broken, sign_test(fixed, broken)


def verdict(n: int, fixed: int, broken: int, p: float, *, what: str = "held-out case") -> tuple[bool, str]:
    """(conclusive, a sentence saying why or why not)."""
    if n < MIN_HOLDOUT:
        return False, (f"too small to conclude: {n} {what}(s) graded both times; at least {MIN_HOLDOUT} are needed "
                       f"(give more cases or a larger holdout)")
    if fixed == broken == 0:
        return False, f"no {what} changed its verdict: no difference to conclude"
    if p >= ALPHA:
        return False, (f"inconclusive: {fixed} {what}(s) fixed and {broken} broken of {n} (p={p:.3g} by an exact "
                       f"sign test; below {ALPHA} is needed)")
    direction = "better" if fixed > broken else "worse"
    return True, f"{direction}: {fixed} {what}(s) fixed and {broken} broken of {n} (p={p:.3g}, exact sign test)"
