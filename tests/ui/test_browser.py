"""The web app in a real browser (Playwright driving Debian's chromium): the chart, hostile bytes
that stay text and run nothing, the review keys and buttons, the filters, and the app mounted in
agno's AgentOS. With JUDGEHOOKS_UI_SCREENSHOTS=1 they write the docs' screenshots."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

import pytest
from _servers import serve
from _ui_fixtures import (  # noqa: F401 (fixtures)
    HOSTILE,
    TURNS,
    browser,
    conversation_records,
    page,
    plain,
    routed_record,
    screenshot,
    seeded,
)

import judgehooks
from judgehooks import SQLiteStore, label
from judgehooks._runtime import runtime
from judgehooks.ui import app

pytestmark = pytest.mark.slow

NOTE = "misses that the refund takes 5 days"


def test_the_overview_draws_a_pass_rate_chart_per_evaluator_with_version_markers(plain, page):
    with serve(app(plain)) as base:
        page.goto(base + "/")
        charts = page.locator("svg.passrate")
        assert charts.count() == 3
        helpful = page.locator("section.chart", has_text="helpful: pass rate")
        assert helpful.locator("circle.rate").count() == 48
        assert helpful.locator("text.version").all_text_contents() == ["v1", "v2"]
        box = helpful.locator("svg").bounding_box()
        assert box and box["width"] > 300 and box["height"] > 100  # drawn, not collapsed by the CSP
        band = helpful.locator("polygon.band").bounding_box()
        assert band and band["height"] > 50  # the 95% interval, shaded
        rows = page.locator("table.overview tbody tr")
        assert rows.count() == 4
        assert page.locator("table.overview tbody td:first-child").all_inner_texts() == ["agent Support"] * 4
        assert page.errors == [] and page.dialogs == []
        screenshot(page, "overview")
        runs = page.locator("section.chart:has(svg.values) h2")
        assert runs.all_inner_texts() == ["Runs: mean latency per hour", "Runs: cost per hour", "Judges: cost per hour"]
        latency = page.locator("section.chart", has_text="Runs: mean latency per hour")
        assert latency.locator("circle.rate").count() == 42  # every seventh run of 48 reported no figures
        screenshot(page, "overview-runs", at="section.chart:has(svg.values)")


def test_filtered_to_one_numeric_evaluator_the_overview_draws_its_scores(plain, page):
    with serve(app(plain)) as base:
        page.goto(base + "/?evaluator=polite")
        scores = page.locator("section.chart", has_text="polite: scores")
        bars = scores.locator("svg rect.bar")
        assert bars.count() == 5  # the scores 5 to 9, one bar each
        heights = [bars.nth(i).bounding_box()["height"] for i in range(5)]
        assert all(h > 20 for h in heights)  # drawn, each a fifth or so of the 47 verdicts
        assert page.locator("table.overview tbody td:nth-child(2)").all_inner_texts() == ["polite"]
        assert page.errors == [] and page.dialogs == []
        screenshot(page, "overview-scores")  # the form, the row, its pass rate and its scores


@pytest.mark.parametrize("path", ["/records/hostile-1", "/records", "/", "/review?queue=failed", "/failures"])
def test_a_hostile_record_is_shown_as_text_and_runs_nothing(seeded, page, path):
    with serve(app(seeded, trace_url="http://127.0.0.1:9/trace/{trace_id}")) as base:
        page.goto(base + path)
        page.wait_for_load_state("load")
        assert page.evaluate("window.__pwned") is None
        assert page.dialogs == [] and page.errors == []
        assert page.locator("img").count() == 0 and page.locator("main svg[onload]").count() == 0
        if path in ("/records/hostile-1", "/review?queue=failed"):
            assert page.locator("pre.output").inner_text() == HOSTILE
            assert page.locator("pre.reason").inner_text() == HOSTILE
        if path == "/records/hostile-1":
            assert page.locator("a[href^='javascript']").count() == 0
            screenshot(page, "hostile")


def test_review_pass_and_fail_store_labels_and_move_on(seeded, page):
    runtime.call(seeded.write, [routed_record()])
    with serve(app(seeded, reviewer="ana")) as base:
        page.goto(base + "/review")
        first = page.locator("article.review").get_attribute("data-record")
        assert first == "routed-1"  # a verdict routed to review comes first, with the reason it was
        assert page.locator("dd.routed").inner_text() == "jurors disagree: 2 passed, 1 failed"
        screenshot(page, "review")
        with page.expect_navigation():
            page.keyboard.press("f")  # the key, through the page's one script file
        second = page.locator("article.review").get_attribute("data-record")
        assert second != first
        page.fill("textarea[name=note]", "fine after all <b>really</b>")
        page.keyboard.press("p")  # typing in the note: a key is text there, not a verdict
        assert page.locator("article.review").get_attribute("data-record") == second
        with page.expect_navigation():
            page.get_by_role("button", name="Pass").click()
        third = page.locator("article.review").get_attribute("data-record")
        page.keyboard.press("s")  # s is a score in `judgehooks review`: no key here, nothing happens
        page.keyboard.press("k")
        assert page.locator("article.review").get_attribute("data-record") == third
        with page.expect_navigation():
            page.keyboard.press("n")  # skip, as in `judgehooks review`
        fourth = page.locator("article.review").get_attribute("data-record")
        assert len({first, second, third, fourth}) == 4
        assert page.errors == []
    labels = {lb.record_id: lb for lb in runtime.call(seeded.read_labels)}
    assert sorted(labels) == sorted([first, second])  # the skipped one has none
    assert labels[first].passed is False and labels[first].reviewer == "ana"
    assert labels[second].passed is True and labels[second].note == "fine after all <b>really</b>p"


def test_the_filters_narrow_the_overview_and_the_records(seeded, page):
    with serve(app(seeded)) as base:
        page.goto(base + "/")
        page.fill("input[name=evaluator]", "polite")
        page.select_option("select[name=bucket]", "day")
        with page.expect_navigation():
            page.get_by_role("button", name="Apply").click()
        assert page.locator("section.chart:has(svg.passrate) h2").all_inner_texts() == ["polite: pass rate per day"]
        assert set(page.locator("table.overview tbody td:nth-child(2)").all_inner_texts()) == {"polite"}

        page.goto(base + "/records")
        page.select_option("select[name=status]", "failed")
        page.fill("input[name=evaluator]", "helpful")
        page.fill("input[name=version]", "v1")
        with page.expect_navigation():
            page.get_by_role("button", name="Apply").click()
        statuses = page.locator("table.records tbody td:nth-child(2)").all_inner_texts()
        assert statuses and set(statuses) == {"failed"} and len(statuses) == 16
        assert set(page.locator("table.records tbody td:nth-child(4)").all_inner_texts()) == {"v1"}
        with page.expect_navigation():
            page.locator("table.records tbody a").first.click()
        assert page.locator("h1").inner_text() == "Record"
        assert page.locator("pre.input").inner_text().startswith("question ")


def test_a_bad_filter_is_said_above_the_form_and_corrected_there(seeded, page):
    with serve(app(seeded)) as base:
        page.goto(base + "/records?status=failed&since=99999999999999d")
        assert page.locator("p.message.bad").inner_text().startswith("Bad request: since: '99999999999999d' reaches")
        assert page.locator("input[name=since]").input_value() == "99999999999999d"
        assert page.locator("select[name=status]").input_value() == "failed"  # the rest of the form kept
        page.fill("input[name=since]", "all")
        with page.expect_navigation():
            page.get_by_role("button", name="Apply").click()
        assert page.locator("p.message.bad").count() == 0
        statuses = page.locator("table.records tbody td:nth-child(2)").all_inner_texts()
        assert statuses and set(statuses) == {"failed"}
        assert page.errors == []


def test_calibration_and_sessions_pages_render(seeded, page):
    for i in range(48):  # each of helpful's records, v1's and v2's; ana disagrees with the judge on every eighth
        judge_passed = i % 2 == 0 if i < 32 else i % 4 != 0
        label(f"helpful-{i:02d}", passed=judge_passed if i % 8 else not judge_passed, by="ana", store=seeded,
              note=None if i % 8 else NOTE)
    with serve(app(seeded)) as base:
        page.goto(base + "/calibration?evaluator=helpful")
        assert page.locator("section.calibration").count() == 2
        assert [k != "-" for k in page.locator("td.kappa").all_inner_texts()] == [True, True]
        screenshot(page, "calibration")
        page.goto(base + "/records/helpful-08")  # the judge passed it, ana failed it
        assert page.locator("h1").inner_text() == "Record"
        assert page.locator("pre.reason").inner_text() == "reason 8"
        assert page.locator("table.labels tbody tr td").all_inner_texts()[:4] == ["ana", "fail", "-", NOTE]
        screenshot(page, "record", full_page=True)
        page.goto(base + "/sessions")
        with page.expect_navigation():
            page.locator("table.records tbody a").first.click()
        assert page.locator("section.turn").count() == 3

    runtime.call(seeded.write, conversation_records())
    with serve(app(seeded)) as base:
        page.goto(base + "/sessions/sess-refund")
        turns = page.locator("section.turn")
        assert [turns.nth(i).locator("pre.input").inner_text() for i in range(3)] == [q for q, _ in TURNS]
        assert [turns.nth(i).locator("aside.window-verdict").count() for i in range(3)] == [0, 0, 1]
        assert "order 1042" in turns.nth(2).locator("aside.window-verdict").inner_text()
        assert page.errors == []
        screenshot(page, "session", full_page=True)


def test_the_app_mounted_in_agentos_shows_what_agentos_runs_were_graded(make_judge, make_agent, tmp_path, page):
    from agno.os import AgentOS

    store = SQLiteStore(tmp_path / "evals.db")
    judge = make_judge(store=store, scoring_strategy="numeric", name="echoes")
    agent = make_agent(judge, id="os-agent", name="os-agent")
    agent_os = AgentOS(agents=[agent], telemetry=False)
    fastapi_app = agent_os.get_app()
    fastapi_app.mount("/evals", app(store, reviewer="ana"))
    with serve(fastapi_app) as base:
        import httpx

        with httpx.Client(base_url=base, timeout=30) as client:
            for prompt in ("good [[score=9]]", "bad [[score=2]]"):
                reply = client.post("/agents/os-agent/runs", data={"message": prompt, "stream": "false"})
                assert reply.status_code == 200, reply.text
            assert judgehooks.drain(60)
            assert client.get("/agents").status_code == 200  # AgentOS's own routes are untouched
        # AgentOS strips trailing slashes, so "/evals/" never reaches the mounted app: its overview
        # is at /evals/overview too
        page.goto(base + "/evals/overview")
        assert page.locator("svg.passrate").count() == 1
        assert page.locator("table.overview tbody tr").count() == 1
        assert "os-agent" in page.locator("table.overview tbody").inner_text()
        screenshot(page, "agentos")
        page.goto(base + "/evals/review")
        with page.expect_navigation():
            page.get_by_role("button", name="Fail").click()
        assert page.url.startswith(base + "/evals/review")
        assert "Nothing to review" in page.locator("main").inner_text()
    assert [lb.passed for lb in runtime.call(store.read_labels)] == [False]
    store.close()


def test_search_finds_a_record_by_a_word_only_it_holds_and_sorting_orders_the_rows(plain, page):
    with serve(app(plain)) as base:
        page.goto(base + "/records")
        page.fill("input[name=q]", "Zanzibar")
        with page.expect_navigation():
            page.get_by_role("button", name="Apply").click()
        links = page.locator("table.records tbody a")
        assert links.count() == 1 and links.first.get_attribute("href").endswith("/records/helpful-13")
        page.fill("input[name=q]", "")
        page.select_option("select[name=sort]", "latency")
        with page.expect_navigation():
            page.get_by_role("button", name="Apply").click()
        cells = page.locator("table.records tbody tr td:nth-child(10)").all_text_contents()  # judge ms
        shown = [float(c) for c in cells if c != "-"]
        assert len(shown) > 10 and shown == sorted(shown, reverse=True)
        page.fill("input[name=evaluator]", "helpful")
        page.select_option("select[name=sort]", "run_latency")
        with page.expect_navigation():
            page.get_by_role("button", name="Apply").click()
        cells = page.locator("table.records tbody tr td:nth-child(7)").all_text_contents()  # the run's ms
        shown = [float(c) for c in cells if c != "-"]
        assert len(shown) == 42 and shown == sorted(shown, reverse=True)
        assert cells[42:] == ["-"] * 6  # the runs without figures, last
        assert page.errors == [] and page.dialogs == []
        screenshot(page, "records")
