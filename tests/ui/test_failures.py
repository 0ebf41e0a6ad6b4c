"""Failure modes: failed verdicts grouped by what their reasons say, offline and deterministic,
each group named by its words, with counts and examples; hostile reasons stay text."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

from datetime import timedelta

from _ui_fixtures import HOSTILE, NOW, seeded  # noqa: F401
from starlette.testclient import TestClient

from judgehooks import EvalRecord
from judgehooks._runtime import runtime
from judgehooks._ui.failures import MAX_GROUPS, group_failures
from judgehooks.ui import app

REFUND = ["The refund amount quoted is wrong: policy allows 30 days, refund stated 14 days.",
          "Wrong refund amount: the policy says a refund within 30 days.",
          "States the refund policy incorrectly, refund window wrong."]
TONE = ["Rude tone: insults the customer and sounds sarcastic.",
        "The tone is rude and sarcastic toward the customer.",
        "Sarcastic, rude tone with the customer."]


def failed(i: int, reason: str, evaluator: str = "helpful") -> EvalRecord:
    return EvalRecord(id=f"f-{evaluator}-{i}", created_at=NOW - timedelta(minutes=i), status="failed",
                      evaluator=evaluator, evaluator_version="v2", mode="binary", passed=False, reason=reason,
                      agent_id="support", run_id=f"fr-{i}")


def test_two_kinds_of_failure_fall_into_two_named_groups():
    mixed = [REFUND[0], TONE[0], REFUND[1], TONE[1], REFUND[2], TONE[2]]
    records = [failed(i, reason) for i, reason in enumerate(mixed)]
    groups, other = group_failures(records)
    assert other == [] and [len(g.members) for g in groups] == [3, 3]
    by_name = {g.name: {r.reason for r in g.members} for g in groups}
    assert {frozenset(v) for v in by_name.values()} == {frozenset(REFUND), frozenset(TONE)}
    assert any("refund" in name for name in by_name) and any("rude" in name or "tone" in name for name in by_name)
    again, _ = group_failures(records)
    assert [g.name for g in again] == [g.name for g in groups]  # deterministic


def test_past_the_group_limit_the_rest_is_counted_not_lost():
    records = [failed(i, f"unique{chr(97 + i % 26)}{chr(97 + i // 26)}word") for i in range(MAX_GROUPS + 12)]
    groups, other = group_failures(records)
    assert len(groups) == MAX_GROUPS and len(other) == 12
    assert sum(len(g.members) for g in groups) + len(other) == len(records)


def test_the_page_lists_groups_with_examples_and_keeps_hostile_reasons_as_text(seeded):
    runtime.call(seeded.write, [failed(i, r) for i, r in enumerate(REFUND + TONE)])
    web = TestClient(app(seeded), base_url="http://127.0.0.1:8765")
    html = web.get("/failures?evaluator=helpful").text
    assert 'class="failure-group"' in html and "refund" in html and 'href="/records/f-helpful-0"' in html
    assert HOSTILE not in html and "&lt;script&gt;" in html
    assert 'href="/failures"' in web.get("/").text  # in the nav
    bad = web.get("/failures?since=yesterday-ish")
    assert bad.status_code == 400 and 'aria-invalid="true"' in bad.text and 'value="yesterday-ish"' in bad.text
