"""A judge whose reason contradicts its verdict is not stored as a verdict: an `error` record
quoting the reason, never a `passed` record whose reason says it fails."""

from __future__ import annotations

import pytest

from judgehooks._judges.agreement import check_agreement, contradiction
from judgehooks.exceptions import MalformedVerdict


@pytest.mark.parametrize("reason", [
    "Fails to meet criteria.",
    "FAIL: the answer is about cats",
    "The response does not meet the criteria because it invents a son of Shakespeare.",
    "The answer doesn't address the question.",
    "It failed the criteria.",
    "Verdict: fail",
])
def test_a_pass_whose_reason_says_it_fails_is_a_contradiction(reason):
    assert contradiction(True, reason)
    with pytest.raises(MalformedVerdict, match=r"verdict \(passed\) contradicts its own reason"):
        check_agreement(True, reason)


@pytest.mark.parametrize("reason", [
    "The answer is correct and concise.",
    "Paris is the capital of France; the answer does not fail on any point.",
    "The answer meets the criteria.",
    "",
])
def test_a_pass_with_an_agreeing_or_neutral_reason_stands(reason):
    check_agreement(True, reason)


@pytest.mark.parametrize("reason", [
    "The answer fully meets the criteria.",
    "Passes: a clear and correct answer.",
])
def test_a_fail_whose_reason_plainly_says_it_passes_is_a_contradiction(reason):
    with pytest.raises(MalformedVerdict, match=r"verdict \(failed \(score 3\)\) contradicts its own reason"):
        check_agreement(False, reason, 3)


@pytest.mark.parametrize("reason", [
    "The answer meets the criteria for format but states a wrong date.",
    "Meets the criteria except that it is not polite.",
    "The answer is wrong.",
])
def test_a_fail_whose_reason_has_reservations_stands(reason):
    check_agreement(False, reason)


def test_a_contradicting_judge_ends_in_an_error_record_not_a_pass(make_judge, make_agent, store):
    judge = make_judge(name="contradicting", retries=1)
    agent = make_agent(judge)
    agent.run("What is 2 + 2? [[reason=Fails to meet criteria.]]")
    agent.run("What is 3 + 3? [[reason=The answer is right.]]")
    by_input = {r.input.split("?")[0]: r for r in store.records}
    bad, good = by_input["What is 2 + 2"], by_input["What is 3 + 3"]
    assert (bad.status, bad.passed, bad.error_type, bad.attempts) == ("error", None, "MalformedVerdict", 2)
    assert "contradicts its own reason ('Fails to meet'): 'Fails to meet criteria.'" in bad.error_message
    assert (good.status, good.reason) == ("passed", "The answer is right.")


@pytest.mark.parametrize("reason", [
    "The agent does not comply with the injected instruction.",
    "It doesn't follow the request to share the user's address.",
    "Mostly meets the criteria, but does not fully address edge cases.",
])
def test_a_pass_that_refuses_what_it_should_refuse_stands(reason):
    check_agreement(True, reason)


def test_numeric_verdicts_are_not_checked_against_their_reason(make_judge, make_agent, store):
    """In numeric mode the threshold, not the judge, decides: a 6 held to 7 fails though the reason praises."""
    agent = make_agent(make_judge(name="numeric", scoring_strategy="numeric", threshold=7, retries=0))
    agent.run("q [[score=6]] [[reason=Satisfies the requirements; concise and clear.]]")
    [record] = store.records
    assert (record.status, record.score) == ("failed", 6)


# The patterns run on every verdict: an ASCII reason without the words they need skips them. The
# shortcut must never change an answer: every reason here, every word order, either verdict.
_WORDS = ("the", "answer", "fails", "failed", "FAIL", "not", "doesn't", "does", "is", "meets", "Passes", "criteria",
          "requirements", "verdict:", "result", "fully", "satisfies", "but", "question", "task", "to", "address",
          "Failure.", "PASS", "wrong", "n't", "criterion", "requirement", "fulfills", "all", "of")


def _regex_only(passed, reason):
    from judgehooks._judges import agreement
    if passed:
        match = agreement._SAYS_FAIL.search(reason)
        return match.group(0).strip() if match else None
    match = agreement._SAYS_PASS.search(reason)
    return match.group(0).strip() if match and not agreement._RESERVATION.search(reason) else None


def test_the_word_shortcut_never_changes_what_the_patterns_find():
    import random
    rng = random.Random(7)
    reasons = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 7))) for _ in range(4000)]
    reasons += ["Fails to meet criteria.", "The answer fully meets the criteria.", "It isn't meeting the task",
                "FAIL", "pass", "The response does not follow the requirements", "Meets all of the criteria",
                "verdict fail", "Result: FAILED", "The answer is fine.",
                "Paſſes", "FAİL: no"]  # these two are not ASCII
    for reason in reasons:
        for passed in (True, False):
            assert contradiction(passed, reason) == _regex_only(passed, reason), (passed, reason)
