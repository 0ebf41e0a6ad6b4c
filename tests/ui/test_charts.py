"""The overview's charts people read: buckets that follow the range (never one dot for an hour of
records), each bucket's 95% interval drawn as a band, and every chart also a table of the same
numbers."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from starlette.testclient import TestClient

from judgehooks import EvalRecord, MemoryStore, SQLiteStore
from judgehooks._base.stats import wilson
from judgehooks._runtime import runtime
from judgehooks._ui.overview import bucket_for
from judgehooks.ui import app


def one_hour_of_records(now: datetime) -> list[EvalRecord]:
    """60 verdicts of one evaluator over the last hour, one a minute; every third fails."""
    return [EvalRecord(id=f"m-{i}", created_at=now - timedelta(minutes=60 - i), status="failed" if i % 3 == 0
                       else "passed", evaluator="brief", evaluator_version="b1", mode="binary", passed=i % 3 != 0,
                       agent_id="support", run_id=f"run-{i}") for i in range(60)]


@pytest.fixture(params=["sqlite", "memory"])
def hour_store(request, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db") if request.param == "sqlite" else MemoryStore()
    runtime.call(store.write, one_hour_of_records(datetime.now(UTC)))
    yield store
    runtime.call(store.aclose)


def _section(html: str, evaluator: str) -> str:
    return html.split(f"<h2>{evaluator}: pass rate")[1].split("</section>")[0]


def test_an_hour_of_records_is_more_than_one_dot(hour_store):
    web = TestClient(app(hour_store), base_url="http://127.0.0.1:8765")
    chart = _section(web.get("/").text, "brief")
    assert "pass rate per minute" in web.get("/").text
    assert chart.count('<circle class="rate"') >= 12
    ten = _section(web.get("/?bucket=10min").text, "brief")
    assert 6 <= ten.count('<circle class="rate"') <= 7  # an hour, cut where the clock's ten minutes fall
    assert _section(web.get("/?bucket=hour").text, "brief").count('<circle class="rate"') in (1, 2)


def test_the_auto_bucket_is_the_widest_that_cuts_the_range_in_twelve():
    now = datetime(2026, 12, 4, tzinfo=UTC)
    for span, bucket in [(timedelta(minutes=30), "minute"), (timedelta(hours=1), "minute"),
                         (timedelta(hours=2), "10min"), (timedelta(hours=12), "hour"), (timedelta(days=3), "hour"),
                         (timedelta(days=7), "hour"), (timedelta(days=12), "day"), (timedelta(days=400), "month")]:
        assert bucket_for("auto", (now - span, now)) == bucket, span
    assert bucket_for("auto", None) == "minute" and bucket_for("day", None) == "day"


def test_a_chosen_range_sets_the_buckets_and_the_axis(hour_store):
    web = TestClient(app(hour_store), base_url="http://127.0.0.1:8765")
    week = web.get("/?since=7d").text
    assert "pass rate per hour" in week  # 7 days in hours, not one dot a day
    axis = r'<text class="axis" x="[\d.]+" y="\d+" text-anchor="middle">([^<]+)</text>'
    ticks = re.findall(axis, _section(week, "brief"))
    assert len(set(ticks)) >= 5  # the axis spans the week chosen, not only the hour that has records


def test_each_bucket_has_its_interval_as_a_band_and_a_table_row(hour_store):
    html = TestClient(app(hour_store), base_url="http://127.0.0.1:8765").get("/?bucket=10min").text
    chart = _section(html, "brief")
    dots = chart.count('<circle class="rate"')
    band = re.search(r'<polygon class="band" points="([^"]+)"', chart)
    assert band and len(band.group(1).split()) == 2 * dots  # the upper edge, then the lower one back
    rows = re.findall(r'<tr><td>([^<]+)</td><td class="num">(\d+)</td><td class="num">(\d+)</td>'
                      r'<td class="num">([^<]+)</td><td class="num">([^<]+)</td></tr>', chart)
    assert len(rows) == dots and sum(int(n) for _, n, *_ in rows) == 60
    for _, n, passed, _, interval in rows:
        low, high = wilson(int(passed), int(n))
        assert interval == f"{100 * low:.1f}% – {100 * high:.1f}%"


def test_wilson_matches_known_values():
    assert wilson(0, 0) is None
    low, high = wilson(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)  # Wilson 1927 / Newcombe 1998, 95%
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0


def test_one_evaluators_overview_draws_its_scores_newest_two_versions_side_by_side(tmp_path):
    from _ui_fixtures import seeded_records

    now = datetime.now(UTC)
    store = SQLiteStore(tmp_path / "evals.db")
    tone = [EvalRecord(id=f"t-{v}-{i}", created_at=now - timedelta(hours=10 - i + (5 if v == "v1" else 0)),
                       status="passed" if s >= 6 else "failed", evaluator="tone", evaluator_version=v,
                       mode="numeric", threshold=6, score=s, passed=s >= 6, agent_id="support", run_id=f"r-{i}")
            for v, shift in (("v1", 0), ("v2", 2)) for i, s in enumerate(range(3 + shift, 8 + shift))]
    runtime.call(store.write, [*seeded_records(), *tone])
    web = TestClient(app(store), base_url="http://127.0.0.1:8765")
    both = web.get("/?evaluator=tone").text
    assert "tone: scores, versions v1 and v2" in both
    section = both.split("tone: scores")[1].split("</section>")[0]
    assert section.count('class="bar a"') == 7 and section.count('class="bar b"') == 7  # scores 3..9, shared
    assert len(re.findall(r"<tr><td>\d+</td>", section)) == 7
    polite = web.get("/?evaluator=polite").text
    assert "polite: scores</h2>" in polite and 'class="bar b"' not in polite  # one version: one side
    assert "scores" not in web.get("/?evaluator=helpful").text.split("pass rate per")[0]  # no numeric score
    assert "histogram" not in web.get("/").text  # only for one evaluator
    runtime.call(store.aclose)
