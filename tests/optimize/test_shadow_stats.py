"""The shadow report's statistics against known values: the exact sign test, Wilson's interval, and
how many more comparisons a result needs."""

from __future__ import annotations

import pytest

from judgehooks._base.stats import wilson
from judgehooks._optimize.shadowreport import Tally, decide, more_needed
from judgehooks._optimize.stats import sign_test


@pytest.mark.parametrize(("wins", "losses", "p"), [
    (12, 0, 2 / 4096),  # 2 * 0.5**12
    (9, 3, 2 * 299 / 4096),  # P(X >= 9 | n=12) = (220 + 66 + 12 + 1) / 4096, doubled
    (3, 9, 2 * 299 / 4096),  # symmetric
    (5, 0, 0.0625),  # five in a row is not enough at 0.05
    (6, 0, 0.03125),  # six is
    (6, 6, 1.0),
    (0, 0, 1.0),
])
def test_the_sign_test_is_the_exact_two_sided_binomial_p(wins, losses, p):
    assert sign_test(wins, losses) == pytest.approx(p, rel=1e-12)


@pytest.mark.parametrize(("successes", "n", "low", "high"), [
    (0, 10, 0.0, 0.27753),  # Wilson's interval, as statsmodels' proportion_confint(method="wilson") gives
    (5, 10, 0.23659, 0.76341),
    (10, 10, 0.72247, 1.0),
    (81, 263, 0.25529, 0.36621),  # Newcombe (1998), Table I: 0.2553 to 0.3662
])
def test_the_wilson_interval_matches_known_values(successes, n, low, high):
    found = wilson(successes, n)
    assert found is not None
    assert found[0] == pytest.approx(low, abs=5e-5) and found[1] == pytest.approx(high, abs=5e-5)
    assert wilson(0, 0) is None


def test_more_needed_extrapolates_the_rate_and_the_share_of_ties():
    assert more_needed(12, 0, 0) == 0  # already significant
    assert more_needed(0, 0, 0) == 6 and more_needed(0, 0, 9) == 6  # the fewest that could ever be significant
    assert more_needed(3, 3, 0) is None  # exactly half: more of the same never differs
    # 4 of 5 decisive won: the first decisive total at which 80% wins is significant, less the 5 so far
    needed = more_needed(4, 1, 0)
    assert needed is not None and needed > 0
    total = 5 + needed
    won = round(0.8 * total)
    assert sign_test(won, total - won) < 0.05
    won_before = round(0.8 * (total - 1))
    assert sign_test(won_before, total - 1 - won_before) >= 0.05
    # with half the comparisons ties, twice as many comparisons are needed for the same decisive ones
    with_ties = more_needed(4, 1, 5)
    assert with_ties == 2 * total - 10


def test_the_decision_promotes_keeps_or_asks_for_more():
    assert decide(Tally(comparisons=12, wins=12))[0] == "promote"
    assert decide(Tally(comparisons=12, losses=12))[0] == "keep"
    decision, p, needed, note = decide(Tally(comparisons=5, wins=4, losses=1))
    assert decision == "not enough data" and p == pytest.approx(0.375) and needed and str(needed) in note
