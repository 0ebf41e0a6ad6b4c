"""Live pages: the overview and the first page of records show a record stored after the page
loaded, without a reload, and only while the page is visible (`live.js`, polling `/api/latest`).
Over plain HTTP: the marker endpoint and the switch; in chromium: the refresh itself."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

import time
from datetime import timedelta

import pytest
from _servers import serve
from _ui_fixtures import NOW, browser, page, seeded  # noqa: F401 (fixtures)
from starlette.testclient import TestClient

from judgehooks import EvalRecord, MemoryStore
from judgehooks._runtime import runtime
from judgehooks.ui import app


def fresh_record(evaluator: str = "fresh-eval", record_id: str = "fresh-1") -> EvalRecord:
    return EvalRecord(id=record_id, created_at=NOW + timedelta(minutes=5), status="passed", evaluator=evaluator,
                      evaluator_version="f1", mode="binary", passed=True, reason="stored after the page loaded",
                      agent_id="support", run_id="run-fresh", input="late question", output="late answer")


def client(store, **options) -> TestClient:
    return TestClient(app(store, **options), base_url="http://127.0.0.1:8765", follow_redirects=False)


def test_the_marker_names_the_newest_record_and_changes_when_one_is_stored(seeded):
    web = client(seeded)
    before = web.get("/api/latest")
    assert before.status_code == 200 and before.headers["cache-control"] == "no-store"
    assert before.json()["latest"].endswith(" hostile-1")  # the newest seeded record
    runtime.call(seeded.write, [fresh_record()])
    assert web.get("/api/latest").json()["latest"] == f"{(NOW + timedelta(minutes=5)).isoformat()} fresh-1"
    assert client(MemoryStore()).get("/api/latest").json() == {"latest": ""}


def test_live_pages_carry_the_marker_they_were_drawn_at_and_other_pages_do_not(seeded):
    web = client(seeded)
    marker = web.get("/api/latest").json()["latest"]
    for path in ("/", "/overview", "/records", "/records?status=failed"):
        html = web.get(path).text
        assert f'data-live-marker="{marker}"' in html and "/static/live.js" in html, path
        assert "data-live-region" in html
    for path in ("/records?page=2", "/calibration", "/sessions", "/records/helpful-01"):
        assert "data-live=" not in web.get(path).text and "live.js" not in web.get(path).text, path


def test_live_every_zero_turns_it_off_and_a_bad_value_is_refused(seeded):
    web = client(seeded, live_every=0)
    assert "data-live=" not in web.get("/").text and "live.js" not in web.get("/records").text
    assert web.get("/api/latest").json() == {"latest": None}
    for bad in (-1, 0.1, 4000, True, "5"):
        with pytest.raises(ValueError, match="live_every"):
            app(seeded, live_every=bad)


@pytest.mark.slow
@pytest.mark.parametrize("path, shown", [("/overview", "table.overview"), ("/records", "table.records")])
def test_a_record_stored_after_the_page_loaded_appears_without_a_reload(seeded, page, path, shown):
    with serve(app(seeded, live_every=0.3)) as base:
        page.goto(base + path)
        page.fill("input[name=agent]", "typed, not sent")  # the form being typed in is never replaced
        loaded = page.evaluate("performance.getEntriesByType('navigation').length")
        assert page.locator(shown).inner_text().count("fresh-eval") == 0
        runtime.call(seeded.write, [fresh_record()])
        page.locator(shown, has_text="fresh-eval").wait_for(timeout=20_000)
        assert page.evaluate("performance.getEntriesByType('navigation').length") == loaded  # no reload
        assert page.input_value("input[name=agent]") == "typed, not sent"
        assert "updated at" in page.locator("[data-live-status]").inner_text()
        assert page.errors == [] and page.dialogs == []


HIDE = """() => {
  Object.defineProperty(document, 'visibilityState',
                        {configurable: true, get: () => window.__shown ? 'visible' : 'hidden'});
  window.__shown = false;
  document.dispatchEvent(new Event('visibilitychange'));
}"""
SHOW = "() => { window.__shown = true; document.dispatchEvent(new Event('visibilitychange')); }"


@pytest.mark.slow
def test_a_hidden_page_does_not_look_and_looks_at_once_when_shown_again(seeded, page):
    looks: list[str] = []
    page.on("request", lambda request: looks.append(request.url) if "/api/latest" in request.url else None)
    with serve(app(seeded, live_every=0.3)) as base:
        page.goto(base + "/overview")
        page.wait_for_function("() => true")
        page.evaluate(HIDE)
        runtime.call(seeded.write, [fresh_record()])
        seen = len(looks)
        time.sleep(2.0)  # several of its intervals: a visible page would have looked about six times
        assert len(looks) == seen  # none while hidden (at most one already in flight when it hid)
        assert page.locator("table.overview", has_text="fresh-eval").count() == 0
        page.evaluate(SHOW)
        page.locator("table.overview", has_text="fresh-eval").wait_for(timeout=20_000)
        assert page.errors == []
