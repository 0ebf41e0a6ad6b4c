"""Parsing judge replies: pure unit tests."""

from __future__ import annotations

import pytest

from judgehooks import MalformedVerdict, parse_verdict


@pytest.mark.parametrize("text, score", [
    ('{"score": 7, "reason": "ok"}', 7),
    ('Here you go:\n```json\n{"score": 3, "reason": "weak"}\n```', 3),
    ('{"note": "x"} then {"score": 10, "reason": "great"}', 10),
    ("REASONING: fine\nSCORE: 8", 8),
    ("**Score:** 6\nReason: meh", 6),
    ('{"score": 9.0, "reason": "ok"}', 9),
    ('{"score": "5", "reason": "ok"}', 5),
])
def test_numeric_replies_in_every_shape(text, score):
    assert parse_verdict(text, "numeric").score == score


@pytest.mark.parametrize("text, passed", [
    ('{"passed": true, "reason": "ok"}', True),
    ('{"passed": false, "reason": "no"}', False),
    ("Thinking...\nREASONING: it is bad\nPASSED: false", False),
    ("PASSED: yes", True),
    ('{"passed": "FAIL", "reason": "x"}', False),
])
def test_binary_replies_in_every_shape(text, passed):
    assert parse_verdict(text, "binary").passed is passed


def test_reason_is_kept():
    assert parse_verdict("REASONING: cites sources\nSCORE: 9", "numeric").reason == "cites sources"
    assert parse_verdict('{"passed": true, "reason": "fine"}', "binary").reason == "fine"


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("   ", "empty"),
    ('{"score": 11, "reason": "x"}', "1-10"),
    ('{"score": 0, "reason": "x"}', "1-10"),
    ('{"score": 7.5, "reason": "x"}', "1-10"),
    ('{"score": true, "reason": "x"}', "1-10"),
    ('{"score": "high"}', "1-10"),
    ("I liked it a lot", "no 'score'"),
    ('{"passed": true}', "no 'score'"),
])
def test_unreadable_numeric_replies_raise_naming_the_problem(text, message):
    with pytest.raises(MalformedVerdict, match=message):
        parse_verdict(text, "numeric")


@pytest.mark.parametrize("text", ['{"passed": "maybe"}', "looks good to me", '{"score": 9}'])
def test_unreadable_binary_replies_raise(text):
    with pytest.raises(MalformedVerdict):
        parse_verdict(text, "binary")


def test_reason_after_prose_on_the_same_line():
    assert parse_verdict("Sure. REASONING: clear answer\nPASSED: true", "binary").reason == "clear answer"
