"""Segments: a pass rate broken down by a user, an agent, a version or any metadata key, counted in
the store (SQL on SQLite and PostgreSQL, equal to the one pass over the records), each with its
Wilson interval, worst first, small segments flagged; hostile values stay text; a bad dimension is
said beside its field."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

import re

import pytest
from _servers import serve
from _ui_fixtures import (  # noqa: F401
    HOSTILE,
    browser,
    hostile_record,
    page,
    plain,
    screenshot,
    seeded,
    seeded_records,
)
from starlette.testclient import TestClient

from judgehooks import MemoryStore, PostgresStore, SQLiteStore
from judgehooks._base.stats import wilson
from judgehooks._runtime import runtime
from judgehooks.stores._base import RecordFilter
from judgehooks.stores._browse import Browse
from judgehooks.stores._segments import segments
from judgehooks.ui import app


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request, tmp_path):
    store = (SQLiteStore(tmp_path / "evals.db") if request.param == "sqlite"
             else PostgresStore(request.getfixturevalue("postgres_dsn"), table="eval_records_segments"))
    runtime.call(store.write, seeded_records())
    yield store
    runtime.call(store.aclose)


@pytest.mark.parametrize("by", ["user", "agent", "version", "evaluator", "meta:plan", "meta:tier", "meta:beta",
                                "meta:missing"])
@pytest.mark.parametrize("where", [Browse(), Browse(RecordFilter(evaluator="helpful"))])
def test_sql_segments_are_the_one_pass_segments(sql_store, by, where):
    memory = MemoryStore()
    runtime.call(memory.write, seeded_records())
    ours = runtime.call(segments, sql_store, where, by)
    assert ours == runtime.call(segments, memory, where, by)
    assert sum(s.n for s in ours[0]) == (97 if where == Browse() else 49)  # every verdict, once


def test_the_page_puts_the_worst_segment_first_with_its_interval(seeded):
    html = TestClient(app(seeded), base_url="http://127.0.0.1:8765").get("/segments?by=meta:plan&evaluator=helpful")
    assert html.status_code == 200
    rows = re.findall(r'<tr(?: class="wide")?>\s*<td>([^<]+)</td>\s*<td class="num">(\d+)</td>\s*'
                      r'<td class="num">(\d+)</td>\s*<td class="num">([^<]+)</td>\s*<td class="num">([^<]+)</td>',
                      html.text)
    helpful = [r for r in seeded_records() if r.evaluator == "helpful" and r.status in ("passed", "failed")]
    expected = {}
    for plan in ("pro", "free"):
        mine = [r for r in helpful if r.metadata.get("plan") == plan]
        expected[plan] = (len(mine), sum(r.status == "passed" for r in mine))
    assert {v: (int(n), int(p)) for v, n, p, *_ in rows} == expected
    rates = [float(rate.rstrip("%")) for *_, rate, _ in rows]
    assert rates == sorted(rates)  # worst first
    low, high = wilson(int(rows[0][2]), int(rows[0][1]))
    assert rows[0][4] == f"{100 * low:.1f}% – {100 * high:.1f}%"


def test_a_small_segment_is_flagged(seeded):
    plans = TestClient(app(seeded), base_url="http://127.0.0.1:8765").get("/segments?by=meta:plan&evaluator=helpful")
    found = runtime.call(segments, seeded, Browse(RecordFilter(evaluator="helpful")), "meta:plan")[0]
    wide = [s for s in found if (lambda i: i[1] - i[0] > 0.3)(wilson(s.passed, s.n))]
    assert plans.text.count('class="wide"') == len(wide) == 2  # the 83% plan's (24 verdicts), and (none)'s (1)
    narrow = TestClient(app(seeded), base_url="http://127.0.0.1:8765").get(
        "/segments?by=meta:beta&evaluator=helpful&since=2026-11-30T00:00:00Z").text
    assert "too few to tell" in narrow and 'class="wide"' in narrow


def test_hostile_values_are_text_and_a_bad_dimension_is_said_beside_its_field(seeded):
    web = TestClient(app(seeded), base_url="http://127.0.0.1:8765")
    runtime.call(seeded.write, [hostile_record().__class__(**{**hostile_record().__dict__, "id": "hostile-2",
                                                                "metadata": {"plan": HOSTILE}})])
    page = web.get("/segments?by=meta:plan").text
    assert HOSTILE not in page and "&lt;script&gt;" in page
    bad = web.get("/segments?by=plan")
    assert bad.status_code == 400 and "by takes user" in bad.text and 'aria-invalid="true"' in bad.text
    assert 'value="plan"' in bad.text  # the form keeps what was typed


@pytest.mark.slow
def test_the_page_breaks_the_pass_rate_down_by_version_in_a_browser(plain, page):
    with serve(app(plain)) as base:
        page.goto(base + "/segments")
        page.fill("input[name=by]", "version")
        with page.expect_navigation():
            page.get_by_role("button", name="Break down").click()
        rows = page.locator("table.segments tbody tr")
        assert [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())] == ["v1", "p1", "v2", "s1"]
        rates = [float(rows.nth(i).locator("td").nth(3).inner_text().rstrip("%")) for i in range(4)]
        assert rates == sorted(rates)  # worst first
        for i in range(4):  # flagged when its interval is wider than 30 points
            n, passed = (int(rows.nth(i).locator("td").nth(k).inner_text()) for k in (1, 2))
            low, high = wilson(passed, n)
            assert (rows.nth(i).get_attribute("class") == "wide") == (high - low > 0.3)
            assert ("too few to tell" in rows.nth(i).inner_text()) == (high - low > 0.3)
        assert page.errors == [] and page.dialogs == []
        screenshot(page, "segments")
