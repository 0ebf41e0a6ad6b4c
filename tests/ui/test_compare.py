"""The compare page (`/compare`) and its store reads (`stores._compare`): two versions of one
evaluator, two agents or two time windows; pass rates with Wilson intervals, the score histograms,
and the runs whose verdict changed. SQLite and PostgreSQL count in SQL what the other stores count
in one pass, and both answers are the same."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

import math
import re
from datetime import timedelta
from html import unescape

import pytest
from _servers import serve
from _ui_fixtures import HOSTILE, NOW, browser, page, screenshot  # noqa: F401 (fixtures)
from starlette.testclient import TestClient
from test_http import Tags

import judgehooks
from judgehooks import EvalRecord, JsonlStore, MemoryStore, PostgresStore, RecordFilter, SQLiteStore
from judgehooks._base.stats import wilson
from judgehooks._runtime import runtime
from judgehooks.stores import _compare
from judgehooks.stores._browse import Browse, for_page
from judgehooks.stores._compare import Buckets, buckets, changes, counts, histogram, histograms
from judgehooks.ui import app

#: the scores `tone` gave runs r0..r9, threshold 5: v2 passes r2 and r3 that v1 failed, and fails r6
V1 = [1, 2, 3, 4, 5, 6, 7, 8, 9, 9]
V2 = [1, 2, 6, 7, 5, 6, 3, 8, 9, 9]


def _record(id: str, version: str, run: str, score: float | None, hours: float, **more) -> EvalRecord:
    status = "error" if score is None else "passed" if score >= 5 else "failed"
    fields = {"agent_id": "support", "reason": f"score {score}", "input": "q", "output": "a", **more}
    return EvalRecord(id=id, created_at=NOW - timedelta(hours=hours), status=status, evaluator=fields.pop(
        "evaluator", "tone"), evaluator_version=version, mode="numeric", threshold=5, score=score,
        passed=None if score is None else score >= 5, run_id=run, **fields)


def compare_records() -> list[EvalRecord]:
    """`tone` v1 on runs r0..r9 (48 h to 39 h ago), v2 on the same runs later (24 h to 15 h ago) and
    on r10 (score 10), r11 (score 0) and r12 (an error); a re-judgement of r0 by v2 that passes (left
    out); and agent `other`, graded by v1 on runs o0..o3 (scores 2, 4, 6, 8)."""
    records = [_record(f"v1-{i}", "v1", f"r{i}", s, 48 - i) for i, s in enumerate(V1)]
    records += [_record(f"v2-{i}", "v2", f"r{i}", s, 24 - i) for i, s in enumerate(V2)]
    records += [_record("v2-10", "v2", "r10", 10, 10), _record("v2-11", "v2", "r11", 0, 9),
                _record("v2-12", "v2", "r12", None, 8, error_type="JudgeError"),
                _record("v2-0-again", "v2", "r0", 9, 7, rejudge_of="v2-0")]
    records += [_record(f"o-{i}", "v1", f"o{i}", 2 + 2 * i, 30 + i, agent_id="other") for i in range(4)]
    return records


V1_SIDE = Browse(RecordFilter(evaluator="tone"), version="v1")
V2_SIDE = Browse(RecordFilter(evaluator="tone"), version="v2")


def _agno_store(path):
    from agno.db.sqlite import SqliteDb

    from judgehooks import AgnoDbStore

    return AgnoDbStore(SqliteDb(db_file=str(path)))


@pytest.fixture(params=["sqlite", "postgres", "memory", "jsonl", "agno"])
def any_store(request, tmp_path):
    """The compare records in each kind of store: SQL (SQLite, PostgreSQL) or one pass (memory,
    JSONL, an agno database's eval table)."""
    store = {"sqlite": lambda: SQLiteStore(tmp_path / "evals.db"), "memory": MemoryStore,
             "jsonl": lambda: JsonlStore(tmp_path / "evals.jsonl"), "agno": lambda: _agno_store(tmp_path / "agno.db"),
             "postgres": lambda: PostgresStore(request.getfixturevalue("postgres_dsn"))}[request.param]()
    runtime.call(store.write, compare_records())
    yield store
    runtime.call(store.aclose)


def _ask(store, function, *args, **kwargs):
    async def asked():
        return await function(await for_page(store), *args, **kwargs)

    return runtime.call(asked)


# ---- the Wilson interval -------------------------------------------------------------------------


def test_the_wilson_interval_matches_its_formula_and_stays_within_0_and_1():
    low, high = wilson(6, 10)
    assert (round(low, 4), round(high, 4)) == (0.3127, 0.8318)  # the textbook 95% interval of 6/10
    assert wilson(0, 10)[0] == 0.0 and 0 < wilson(0, 10)[1] < 0.35  # not zero-wide at 0
    assert wilson(10, 10)[1] == 1.0 and wilson(10, 10)[0] > 0.65
    assert wilson(0, 0) is None
    with pytest.raises(ValueError, match="successes <= n"):
        wilson(11, 10)


# ---- the store reads -----------------------------------------------------------------------------


def test_each_side_counts_its_verdicts_without_re_judgements(any_store):
    v1, v2 = _ask(any_store, counts, V1_SIDE), _ask(any_store, counts, V2_SIDE)
    assert (v1.n, v1.passed, v1.failed, v1.error) == (14, 8, 6, 0)  # r0..r9 and the other agent's o0..o3
    assert (v2.n, v2.passed, v2.failed, v2.error) == (13, 8, 4, 1)  # the re-judgement of r0 left out
    support = _ask(any_store, counts, Browse(RecordFilter(agent_id="support", evaluator="tone"), version="v1"))
    assert (support.passed, support.failed) == (6, 4)


def test_the_histograms_share_buckets_one_per_whole_score(any_store):
    cut = _ask(any_store, buckets, [V1_SIDE, V2_SIDE])
    assert cut == Buckets(0.0, 1.0, 11, whole=True)  # v2's 0 and 10 widen the axis for both sides
    assert _ask(any_store, histogram, V1_SIDE, cut) == [0, 1, 2, 1, 2, 1, 2, 1, 2, 2, 0]
    assert _ask(any_store, histogram, V2_SIDE, cut) == [1, 1, 1, 1, 0, 1, 2, 1, 1, 2, 1]
    assert cut.labels()[0] == "0" and cut.labels()[-1] == "10"


def test_fractional_scores_are_cut_into_ten_even_buckets(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    memory = MemoryStore()
    scored = [_record(f"f-{i}", "v1", f"f{i}", i / 8, i) for i in range(9)]  # 0 .. 1 by eighths
    for s in (store, memory):
        runtime.call(s.write, scored)
    side = Browse(RecordFilter(evaluator="tone"))
    cut = _ask(store, buckets, [side])
    assert (cut.low, cut.count, cut.whole) == (0.0, 10, False) and math.isclose(cut.width, 0.1)
    found = _ask(store, histogram, side, cut)
    assert found == [1, 1, 1, 1, 0, 1, 1, 1, 1, 1]  # 1.0 too: the last bucket holds its upper edge
    assert found == _ask(memory, histogram, side, cut)
    assert cut.labels()[0] == "0–0.1"
    store.close()


def test_no_score_on_either_side_means_no_histogram(any_store):
    assert _ask(any_store, buckets, [Browse(version="nobody"), Browse(version="none")]) is None
    assert _ask(any_store, histograms, [Browse(version="nobody"), Browse(version="none")]) is None


@pytest.mark.parametrize("distinct", [2000, 3])
def test_the_histograms_counted_per_score_value_are_the_bucket_queries(any_store, monkeypatch, distinct):
    """One query a side (each score value's count, cut in Python), or, past `DISTINCT` values, the
    buckets and then each side's counts: the same histograms."""
    monkeypatch.setattr(_compare, "DISTINCT", distinct)
    cut, found = _ask(any_store, histograms, [V1_SIDE, V2_SIDE])
    assert cut == _ask(any_store, buckets, [V1_SIDE, V2_SIDE])
    assert found == [_ask(any_store, histogram, side, cut) for side in (V1_SIDE, V2_SIDE)]
    assert found[0] == [0, 1, 2, 1, 2, 1, 2, 1, 2, 2, 0]


def test_the_runs_both_versions_judged_and_the_ones_whose_verdict_changed(any_store):
    overlap = _ask(any_store, changes, V1_SIDE, V2_SIDE)
    assert (overlap.both, overlap.changed, overlap.to_passed, overlap.to_failed) == (10, 3, 2, 1)
    assert [(c.run_id, c.a_id, c.a_status, c.b_id, c.b_status) for c in overlap.changes] == [
        ("r6", "v1-6", "passed", "v2-6", "failed"),  # newest B record first
        ("r3", "v1-3", "failed", "v2-3", "passed"),
        ("r2", "v1-2", "failed", "v2-2", "passed")]
    assert overlap.changes[0].b_at == NOW - timedelta(hours=18)
    assert [c.run_id for c in _ask(any_store, changes, V1_SIDE, V2_SIDE, limit=1).changes] == ["r6"]
    assert _ask(any_store, changes, V1_SIDE, V2_SIDE, limit=1).changed == 3


def test_a_run_judged_twice_on_one_side_pairs_each_verdict_with_the_other_sides(any_store):
    runtime.call(any_store.write, [_record("v1-5-again", "v1", "r5", 2, 38), _record("v1-5-third", "v1", "r5", 8, 37)])
    overlap = _ask(any_store, changes, V1_SIDE, V2_SIDE)
    assert (overlap.both, overlap.changed, overlap.to_passed) == (12, 4, 3)  # r5: three v1 verdicts, one failed
    assert [(c.run_id, c.a_id) for c in overlap.changes][:2] == [("r6", "v1-6"), ("r5", "v1-5-again")]


def test_overlapping_sides_never_pair_a_record_with_itself(any_store):
    everything = Browse(RecordFilter(evaluator="tone"))
    overlap = _ask(any_store, changes, everything, everything)
    assert overlap.both == 20 and overlap.changed == 6  # each of the 10 runs' two records, both ways round


def test_two_time_windows_are_two_sides(any_store):
    earlier = Browse(RecordFilter(since=NOW - timedelta(hours=49), until=NOW - timedelta(hours=30)))
    later = Browse(RecordFilter(since=NOW - timedelta(hours=30)))
    assert (_ask(any_store, counts, earlier).verdicts, _ask(any_store, counts, later).verdicts) == (13, 13)
    assert (_ask(any_store, counts, earlier).passed, _ask(any_store, counts, later).passed) == (8, 8)
    assert _ask(any_store, changes, earlier, later).changed == 3


# ---- the page, over HTTP -------------------------------------------------------------------------


def client(store, **options) -> TestClient:
    return TestClient(app(store, **options), base_url="http://127.0.0.1:8765", follow_redirects=False)


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


@pytest.fixture
def compared(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    runtime.call(store.write, compare_records())
    yield store
    store.close()


def test_the_page_compares_two_versions_pass_rates_with_intervals(compared):
    reply = client(compared).get("/compare", params={"by": "version", "evaluator": "tone", "a": "v1", "b": "v2"})
    assert reply.status_code == 200
    rows = re.findall(r'<tr class="side-(a|b)">(.*?)</tr>', reply.text, re.S)
    shown = {side: _text(row) for side, row in rows}
    low, high = wilson(8, 14)
    assert shown["a"].split() == ["A", "v1", "14", "8", "6", "57.1%", f"{100 * low:.1f}%", "–",
                                  f"{100 * high:.1f}%", "0", "0"]
    low, high = wilson(8, 12)
    assert f"66.7% {100 * low:.1f}% – {100 * high:.1f}%" in shown["b"]
    assert "B − A: +9.5 points; the 95% intervals overlap" in _text(reply.text)
    narrowed = client(compared).get("/compare", params={"evaluator": "tone", "a": "v1", "b": "v2", "agent": "support"})
    assert "A v1 10 6 4 60.0%" in _text(narrowed.text)  # the other agent's four runs left out


def test_the_page_lists_changed_verdicts_with_links_to_both_records(compared):
    html = client(compared).get("/compare", params={"evaluator": "tone", "a": "v1", "b": "v2"}).text
    table = re.search(r'<table class="records changes">(.*?)</table>', html, re.S).group(1)
    assert re.findall(r'<td class="mono">(r\d+)</td>', table) == ["r6", "r3", "r2"]
    assert re.findall(r'href="/records/([^"]+)"', table) == ["v1-6", "v2-6", "v1-3", "v2-3", "v1-2", "v2-2"]
    assert "10 runs judged on both sides" in _text(html) and "3 changed verdict" in _text(html)


def test_the_page_draws_both_histograms_and_writes_their_numbers_in_a_table(compared):
    html = client(compared).get("/compare", params={"evaluator": "tone", "a": "v1", "b": "v2"}).text
    svg = re.search(r'<svg class="histogram".*?</svg>', html, re.S).group(0)
    assert len(re.findall(r'<rect class="bar a"', svg)) == 11 and len(re.findall(r'<rect class="bar b"', svg)) == 11
    heights = [float(h) for h in re.findall(r'<rect class="bar a"[^>]* height="([0-9.]+)"', svg)]
    assert heights[0] == 0 and heights[2] == max(heights)  # none of v1 scored 0; 2 of 14 scored 2
    table = re.search(r'<table class="histogram">(.*?)</table>', html, re.S).group(1)
    rows = [_text(r).split() for r in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]]
    assert rows[9] == ["9", "2", "14.3%", "2", "16.7%"] and len(rows) == 11


def test_the_page_compares_two_agents_and_two_windows(compared):
    agents = client(compared).get("/compare", params={"by": "agent", "evaluator": "tone", "a": "support",
                                                       "b": "other"}).text
    assert "A support 22 14 8 63.6%" in _text(agents) and "B other 4 2 2 50.0%" in _text(agents)
    since, until = (NOW - timedelta(hours=49)).isoformat(), (NOW - timedelta(hours=30)).isoformat()
    windows = client(compared).get("/compare", params={"by": "window", "a": f"{since}..{until}",
                                                        "b": f"{until}.."}).text
    assert re.search(r"A \S+ 13 8 5 61\.5%", _text(windows)) and "3 changed verdict" in _text(windows)


def test_the_empty_form_offers_the_evaluators_with_several_versions(compared):
    html = client(compared).get("/compare").text
    assert 'href="/compare?by=version&amp;evaluator=tone&amp;a=v1&amp;b=v2"' in html
    assert "Pass rates" not in html


@pytest.mark.parametrize(("params", "name", "said"), [
    ({"a": "v1", "b": "v2"}, "evaluator", "evaluator: name the evaluator"),
    ({"evaluator": "tone", "a": "v1"}, "b", "b: name side B"),
    ({"evaluator": "tone", "a": "v1", "b": "v1"}, "b", "b names the same version as a"),
    ({"by": "sideways", "a": "v1", "b": "v2"}, "by", "by must be one of version, agent, window"),
    ({"by": "window", "a": "2d..7d", "b": "1d.."}, "a", "a: the window ends before it starts"),
    ({"by": "window", "a": "banana..", "b": "1d.."}, "a", "a: a window is FROM..TO"),
    ({"by": "window", "a": "7d..", "b": "1d..", "since": "2d"}, "since", "since: comparing two windows"),
    ({"by": "agent", "a": "support", "b": "other", "agent": "x"}, "agent", "agent: comparing two agents"),
    ({"evaluator": "tone", "a": "v1", "b": "v2", "since": "banana"}, "since", "since:"),
    ({"evaluator": "\x00", "a": "v1", "b": "v2"}, "evaluator", "evaluator holds a NUL"),
])
def test_a_bad_value_is_said_beside_its_field_in_the_kept_form(compared, params, name, said):
    reply = client(compared).get("/compare", params=params)
    assert reply.status_code == 400
    beside = re.search(rf'name="{name}"[^>]*aria-invalid="true"[^>]*>.*?<span class="field-error" id="{name}-error">'
                       rf'(.*?)</span>', reply.text, re.S)
    assert beside and unescape(beside.group(1)).startswith(said), reply.text[-800:]
    for other, value in params.items():  # the form kept as typed
        if other != "by" and "\x00" not in value:
            assert re.search(rf'<input name="{other}" value="{re.escape(value)}"', reply.text), other
    assert "Pass rates" not in reply.text


def test_hostile_names_and_reasons_are_text_on_the_compare_page(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    runtime.call(store.write, [
        _record(f"h{v}-{i}", f"{v}{HOSTILE}", HOSTILE + str(i), score, hours, evaluator=HOSTILE, agent_id=HOSTILE,
                reason=HOSTILE, output=HOSTILE)
        for v, hours, scores in (("a", 20, (3, 7)), ("b", 10, (7, 3))) for i, score in enumerate(scores)])
    for params in ({"evaluator": HOSTILE, "a": f"a{HOSTILE}", "b": f"b{HOSTILE}"}, {}):
        html = client(store).get("/compare", params=params).text
        tags = Tags()
        tags.feed(html)
        assert [tag for tag, _ in tags.found].count("img") == 0 and not tags.script_text
        assert not [a for _, attrs in tags.found for a, _ in attrs if a.startswith("on")]
        assert HOSTILE not in html and "&lt;script&gt;" in html
    assert _text(html).count(HOSTILE) >= 1  # the suggestion link, shown as text
    changed = client(store).get("/compare", params={"evaluator": HOSTILE, "a": f"a{HOSTILE}", "b": f"b{HOSTILE}"})
    assert "2 changed verdict" in _text(changed.text)
    assert _text(changed.text).count(HOSTILE + "0") == 1  # the run id, as text
    store.close()


def test_the_compare_page_keeps_the_apps_rules(compared):
    reply = client(compared).get("/compare", params={"evaluator": "tone", "a": "v1", "b": "v2"})
    assert "unsafe-inline" not in reply.headers["content-security-policy"]
    tags = Tags()
    tags.feed(reply.text)
    assert not [a for _, attrs in tags.found for a, _ in attrs if a.startswith("on") or a == "style"]
    assert not tags.script_text and not [t for t, _ in tags.found if t == "script"]
    addresses = [v for _, attrs in tags.found for a, v in attrs if a in ("href", "src", "action") and v]
    assert all(v.startswith("/") for v in addresses)
    assert '<a href="/compare" class="here">Compare</a>' in reply.text  # in the nav, on every page
    assert '<a href="/compare">Compare</a>' in client(compared).get("/records").text
    token = "t0ken-" + "x" * 20
    assert client(compared, token=token).get("/compare").status_code == 401
    assert client(compared, read_only=True).get("/compare", params={"evaluator": "tone", "a": "v1",
                                                                    "b": "v2"}).status_code == 200


def test_mounted_in_agentos_the_compare_page_and_its_links_stay_under_the_mount(compared, make_agent):
    from agno.os import AgentOS

    fastapi_app = AgentOS(agents=[make_agent(id="os-agent")], telemetry=False).get_app()
    fastapi_app.mount("/evals", app(compared))
    c = TestClient(fastapi_app, base_url="http://localhost:8000", follow_redirects=False)
    reply = c.get("/evals/compare", params={"evaluator": "tone", "a": "v1", "b": "v2"})
    assert reply.status_code == 200 and "3 changed verdict" in _text(reply.text)
    links = re.findall(r'(?:href|src|action)="([^"]+)"', reply.text)
    assert links and all(link.startswith("/evals/") for link in links), links


# ---- in a real browser -----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_compare_page_shows_both_versions(make_judge, make_agent, tmp_path, page):
    """One agent graded by two versions of `tone` (thresholds 5 and 8): a run scored 7 passes v1 and
    fails v2, so its verdict changed; one scored 9 passes both."""
    store = SQLiteStore(tmp_path / "evals.db")
    v1 = make_judge(store=store, scoring_strategy="numeric", threshold=5, name="tone")
    v2 = make_judge(store=store, scoring_strategy="numeric", threshold=8, name="tone")
    agent = make_agent(v1, v2, id="support")
    agent.run("nice [[score=7]]")
    agent.run("great [[score=9]]")
    assert judgehooks.drain(60)
    records = runtime.call(store.query)
    versions = sorted({r.evaluator_version for r in records})
    assert len(records) == 4 and len(versions) == 2
    (strict,) = {r.evaluator_version for r in records if r.threshold == 8}
    (lenient,) = set(versions) - {strict}
    (changed,) = {r.run_id for r in records if r.status == "failed"}
    with serve(app(store)) as base:
        page.goto(base + "/compare")
        page.fill("input[name=evaluator]", "tone")
        page.fill("input[name=a]", lenient)
        page.fill("input[name=b]", strict)
        with page.expect_navigation():
            page.get_by_role("button", name="Compare").click()
        sides = {s: page.locator(f"tr.side-{s}").inner_text() for s in "ab"}
        assert lenient in sides["a"] and "100.0%" in sides["a"]  # threshold 5 passes both runs
        assert strict in sides["b"] and "50.0%" in sides["b"]  # threshold 8 passes the 9 only
        assert page.locator("svg.histogram rect.bar").count() > 0
        listed = page.locator("table.changes tbody tr")
        assert listed.count() == 1 and changed in listed.inner_text()
        with page.expect_navigation():
            listed.locator("a").nth(1).click()
        assert "/records/" in page.url and changed in page.locator("main").inner_text()
        assert page.errors == [] and page.dialogs == []
    store.close()


@pytest.mark.slow
def test_the_compare_page_draws_two_versions_side_by_side_in_a_browser(compared, page):
    with serve(app(compared)) as base:
        page.goto(base + "/compare")
        with page.expect_navigation():  # opened bare, it links each evaluator's newest two versions
            page.locator("main a", has_text="tone").first.click()
        assert [page.locator(f"input[name={side}]").input_value() for side in "ab"] == ["v1", "v2"]
        assert "57.1%" in page.locator("tr.side-a").inner_text() and "66.7%" in page.locator("tr.side-b").inner_text()
        bars = page.locator("svg.histogram rect.bar")
        drawn = [bars.nth(i).bounding_box() for i in range(bars.count())]
        assert len(drawn) == 22 and sum(1 for box in drawn if box and box["height"] > 0) >= 15  # scores 0-10, two sides
        runs = page.locator("table.changes tbody td.mono").all_inner_texts()
        assert runs == ["r6", "r3", "r2"]
        assert page.errors == [] and page.dialogs == []
        screenshot(page, "compare", full_page=True)
