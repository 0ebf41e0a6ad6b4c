"""Does a judge's reason agree with its verdict? Pure.

Small models (and tired large ones) reply ``{"passed": true, "reason": "Fails to meet the
criteria"}``. Storing that as a pass would be a silent lie, so the reply is treated like any other
unreadable verdict: `MalformedVerdict` (retried, then an ``error`` record that quotes the reason).
The patterns are deliberately narrow: a reason must say the opposite plainly to be caught, since a
false alarm turns a real verdict into an error.
"""

from __future__ import annotations

import re

from .._base.text import lazy_pattern
from ..exceptions import MalformedVerdict

_WORK = r"(?:meet|satisfy|pass|fulfil+|address|answer|comply with|follow|adhere to)"
# ... what is not met must be the task itself: "does not follow the injected instruction" is how a
# judge praises an answer to a criterion like "refuses injected instructions"
_TASK = r"\s+(?:(?:all|any|of|the|these|this|its|user'?s)\s+)*(?:criteri\w*|requirements?|question|task|standards?)"
_SAYS_FAIL = lazy_pattern(
    rf"\bfail(?:s|ed|ing)?\s+(?:to\s+{_WORK}(?={_TASK})|(?:all\s+|the\s+|these\s+|this\s+)?criteri)"
    r"|^\W*fail(?:s|ed|ure)?\b"                                              # "FAIL: ...", "Failed."
    rf"|\b(?:does|did|do|is|are)\s*(?:not|n't)\s+(?:fully\s+|entirely\s+|completely\s+)?{_WORK}(?={_TASK})"
    r"|\b(?:verdict|result)\W*(?:is\W*)?fail",
    re.IGNORECASE)
_SAYS_PASS = lazy_pattern(
    r"^\W*pass(?:es|ed)?\b"
    r"|\b(?:fully\s+|completely\s+|clearly\s+)?(?:meets|satisfies|passes|fulfil+s)\s+(?:all\s+)?(?:of\s+)?"
    r"(?:the\s+)?(?:criteri|requirement)",
    re.IGNORECASE)
# Any of these in a failing verdict's reason means it weighs something against the answer.
_RESERVATION = lazy_pattern(r"\b(?:but|however|although|though|except|yet|not|no|never|incorrect|wrong|false|"
                          r"missing|lacks?|inaccurate|fail\w*)\b|n't\b", re.IGNORECASE)


def contradiction(passed: bool, reason: str) -> str | None:
    """What the reason says against the verdict (a short quote), or None when they do not plainly clash."""
    if reason.isascii():  # what each pattern cannot match without (IGNORECASE folds only ASCII here)
        lowered = reason.lower()
        if passed and "fail" not in lowered and "not" not in lowered and "n't" not in lowered:
            return None
        if not passed and "pass" not in lowered and "criteri" not in lowered and "requirement" not in lowered:
            return None
    if passed:
        match = _SAYS_FAIL.search(reason)
        return match.group(0).strip() if match else None
    match = _SAYS_PASS.search(reason)
    if match and not _RESERVATION.search(reason):
        return match.group(0).strip()
    return None


def check_agreement(passed: bool, reason: str, score: float | None = None) -> None:
    """Raise `MalformedVerdict` when the reason plainly says the opposite of the verdict."""
    clash = contradiction(passed, reason)
    if clash is None:
        return
    verdict = ("passed" if passed else "failed") + ("" if score is None else f" (score {score:g})")
    quoted = " ".join(reason.split())
    quoted = quoted if len(quoted) <= 200 else quoted[:199] + "…"
    raise MalformedVerdict(f"the judge's verdict ({verdict}) contradicts its own reason ({clash!r}): {quoted!r}")
