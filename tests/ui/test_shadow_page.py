"""The web app's Shadow page: the report `shadow_report` gives, under the strict CSP, every record
byte escaped."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from _servers import serve
from _ui_fixtures import HOSTILE, browser, page, screenshot  # noqa: F401 (fixtures)
from starlette.testclient import TestClient

from judgehooks import EvalRecord, SQLiteStore
from judgehooks._runtime import runtime
from judgehooks.ui import app

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def _store(tmp_path) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "shadow.db")
    now = datetime(2026, 12, 1, tzinfo=UTC)
    records = [EvalRecord(id=f"s-{i}", created_at=now - timedelta(minutes=i), status="passed", evaluator="new-prompt",
                          evaluator_version="v1", mode="binary", passed=True, score=1.0, run_id=f"run-{i}",
                          agent_id="support", user_id=HOSTILE if i == 0 else f"u{i % 2}", input="q", output="a",
                          details={"winner": "candidate", "candidate_output": "better"})
               for i in range(10)]
    runtime.call(store.write, records)
    return store


def test_the_shadow_page_shows_the_decision_and_escapes_every_record_byte(tmp_path):
    client = TestClient(app(_store(tmp_path)), base_url="http://127.0.0.1:8765")
    reply = client.get("/shadow?name=new-prompt&by=user_id")
    assert reply.status_code == 200 and reply.headers["content-security-policy"] == CSP
    html = reply.text
    assert "<strong>promote</strong>" in html and 'class="num outcome">10 / 0 / 0<' in html
    assert "by user_id" in html and "<script>window.__pwned" not in html and "&lt;script&gt;" in html
    assert "Name a Shadow" in client.get("/shadow").text
    assert client.get("/shadow?name=%00").status_code == 400


@pytest.mark.slow
def test_the_shadow_page_in_a_browser_shows_hostile_segments_as_text_and_runs_nothing(tmp_path, page):
    with serve(app(_store(tmp_path))) as base:
        page.goto(base + "/shadow?name=new-prompt&by=user_id")
        page.wait_for_load_state("load")
        assert page.evaluate("window.__pwned") is None and page.dialogs == [] and page.errors == []
        assert page.locator("p.decision strong").inner_text() == "promote"
        assert HOSTILE in page.locator("table.segments").inner_text()  # shown as text


#: a Shadow record's score for each winner, as `Shadow` writes it
SCORES = {"candidate": 1.0, "tie": 0.5, "live": 0.0}


def _comparisons(tmp_path) -> SQLiteStore:
    """Shadow `concise-prompt` over 40 live runs of agent `support` by users u0-u3, recorded as a
    Shadow records them: the candidate wins 26, loses 11 (5 of them u3's, half of u3's runs) and ties 3."""
    store = SQLiteStore(tmp_path / "comparisons.db")
    now = datetime(2026, 12, 1, tzinfo=UTC)
    records = []
    for i in range(40):
        user = f"u{i % 4}"
        winner = "live" if i % 5 == 4 or (user == "u3" and i % 3 == 0) else "tie" if i % 9 == 0 else "candidate"
        records.append(EvalRecord(
            id=f"c-{i}", created_at=now - timedelta(minutes=5 * i), status="passed", evaluator="concise-prompt",
            evaluator_version="cp1", mode="binary", passed=winner != "live", score=SCORES[winner], run_id=f"run-{i}",
            agent_id="support", user_id=user, input=f"question {i}", output=f"live answer {i}",
            reason=f"prefers the {winner} answer", details={"winner": winner, "candidate_output": f"short answer {i}"}))
    runtime.call(store.write, records)
    return store


@pytest.mark.slow
def test_the_shadow_page_in_a_browser_reports_the_candidate_against_the_live_agent_per_user(tmp_path, page):
    store = _comparisons(tmp_path)
    records = runtime.call(store.query)
    outcome = [sum(r.details["winner"] == w for r in records) for w in ("candidate", "live", "tie")]
    with serve(app(store)) as base:
        page.goto(base + "/shadow")
        page.fill("input[name=name]", "concise-prompt")
        page.fill("input[name=by]", "user_id")
        with page.expect_navigation():
            page.get_by_role("button", name="Apply").click()
        assert outcome == [26, 11, 3] and page.locator("td.outcome").inner_text() == "26 / 11 / 3"
        assert page.locator("td.comparisons").inner_text() == str(sum(outcome))
        rows = {r.split()[0]: r.split()[1:] for r in page.locator("table.segments tbody tr").all_inner_texts()}
        assert sorted(rows) == ["u0", "u1", "u2", "u3"]
        assert rows["u3"] == ["10", "5", "5", "0", "50.0%"]  # the user the candidate serves no better
        assert page.locator("p.decision strong").inner_text() == "promote"  # 26 of 37 decisive: p = 0.02
        assert page.errors == [] and page.dialogs == []
        screenshot(page, "shadow")
    store.close()
