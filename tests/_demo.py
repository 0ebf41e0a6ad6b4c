"""What the quickstart demo must show, whichever model answers: shared by the example tests
and the local-model test (and mirrored by .ci/run's checks on the README's first command)."""

from __future__ import annotations

import re


def assert_the_demo_shows_the_product(out: str) -> None:
    """A pass, a failure with its alert, a blocked answer with the fallback, an error with on_error,
    and the report, each with its reason: what tests/integrations/test_local_model.py and .ci/run also check."""
    assert "-> passed  mentions-the-key-fact: the answer mentions 'Paris'" in out
    assert ("ALERT (on_fail): support-bot failed mentions-the-key-fact on 'Who wrote Romeo and Juliet?'\n"
            "     -> failed  mentions-the-key-fact: the answer does not mention 'Shakespeare'") in out
    assert "-> failed  spider-gate: the answer does not mention '8'" in out
    assert ("what the caller receives: \"I'm not sure about that one; a colleague will follow up.\" "
            "(run status: ERROR") in out
    assert "on_error: unreachable-judge could not grade run" in out
    # the record names where the judge was not found
    assert ("-> error   unreachable-judge: InternalServerError: could not connect to the judge at "
            "http://127.0.0.1:") in out
    report = out[out.index("== 5. The report: judgehooks report --store judgehooks.db --since "):]
    assert "agent support-bot" in report and "most common errors (1):" in report
    # the scripted bot's two failures are certain; the tiny model's own verdicts may add more
    assert re.search(r"worst failures \([2-9]\):", report) and "the answer does not mention 'Shakespeare'" in report
    assert all(len(line) <= 100 for line in report.splitlines()[1:]), report
    assert "Next: `judgehooks report --store judgehooks.db`" in out
