"""Doubt routed to people (issue 44, item 4): live verdicts whose jurors disagree, whose score lies
within `review_margin` of the threshold, or that a `review_sample_rate` audit picks carry the reason
in `review_reason`, and the review queues (`judgehooks review`, the web app's review page) take them
first. Only live traffic is routed: never offline grades, `optimize` trials, `Shadow` comparisons or
`consistency` re-judgements. Real agno agents and teams over the loopback stub, real SQLite."""

from __future__ import annotations

import functools
import uuid

import pytest
from _runner import run_cli
from starlette.testclient import TestClient

import judgehooks
from judgehooks import Contains, Ensemble, SQLiteStore
from judgehooks._grading.routing import Review, audit_draw
from judgehooks._runtime import runtime
from judgehooks.ui import app


def records(store: SQLiteStore) -> list[judgehooks.EvalRecord]:
    return runtime.call(functools.partial(store.query, limit=None))


def numeric(make_judge, store, **kw):
    return make_judge(store=store, scoring_strategy="numeric", threshold=7, **kw)


def test_a_score_within_the_margin_is_routed_with_its_reason(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    agent = make_agent(numeric(make_judge, store, review_margin=1))
    near, far_pass, far_fail = (agent.run(text) for text in ("near [[score=6]]", "far [[score=10]]",
                                                              "far [[score=2]]"))
    by_run = {r.run_id: r for r in records(store)}
    assert by_run[near.run_id].review_reason == "score 6 within 1 of the threshold 7"
    assert by_run[near.run_id].status == "failed"
    assert by_run[far_pass.run_id].review_reason is None and by_run[far_fail.run_id].review_reason is None
    store.close()


def test_jurors_that_disagree_are_routed_and_agreeing_ones_are_not(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    jury = Ensemble(numeric(make_judge, None, name="juror"), samples=2, aggregate="majority", name="jury",
                    store=store)
    agent = make_agent(jury)
    split = agent.run("split [[scores=9,2]]")
    agreed = agent.run("agreed [[score=9]]")
    by_run = {r.run_id: r for r in records(store)}
    assert by_run[split.run_id].details["votes"] == {"passed": 1, "failed": 1}
    assert by_run[split.run_id].review_reason == "jurors disagree: 1 passed, 1 failed"
    assert by_run[agreed.run_id].review_reason is None
    store.close()


def test_the_audit_sample_picks_by_record_id_the_same_everywhere(make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    agent = make_agent(Contains("hello", name="audited", store=store, review_sample_rate=0.5))
    for i in range(40):
        agent.run(f"hello {i}")
    stored = records(store)
    routed = [r for r in stored if r.review_reason is not None]
    assert 0 < len(routed) < len(stored)  # 40 draws at one half: all or none is 2 in a trillion
    for record in stored:  # decided by the id alone: any process, a replay, resume, a worker agree
        assert (record.review_reason == "audit sample (50%)") == (audit_draw(record.id) < 0.5)
    store.close()


def test_all_at_once_a_team_in_the_background_with_every_reason(make_judge, make_team, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    team = make_team(numeric(make_judge, store, review_margin=2, review_sample_rate=1.0, run_in_background=True,
                             outbox=str(tmp_path / "o.db")))
    out = team.run("close call [[score=8]]")
    assert judgehooks.drain(30)
    (record,) = records(store)
    assert record.run_id == out.run_id and record.team_id is not None
    assert record.review_reason == "score 8 within 2 of the threshold 7; audit sample (100%)"
    store.close()


def test_errors_and_skips_are_never_routed(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    agent = make_agent(numeric(make_judge, store, retries=0, review_sample_rate=1.0, max_calls=1,
                               budget=f"b-{uuid.uuid4().hex[:6]}"))
    agent.run("broken [[judge_status=500]]")  # the judge errs: an error, which spends the one call
    agent.run("over the cap")  # skipped, reason budget
    assert sorted((r.status, r.review_reason) for r in records(store)) == [("error", None), ("skipped", None)]
    store.close()


def test_offline_grades_are_never_routed(make_judge, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    judge = numeric(make_judge, store, review_margin=10, review_sample_rate=1.0)
    result = judge.run(cases=[{"input": "q [[score=7]]", "output": "a"}, {"input": "q2 [[score=3]]", "output": "b"}])
    assert [r.status for r in result.results] == ["passed", "failed"]
    assert all(r.review_reason is None for r in result.results)
    assert all(r.review_reason is None for r in records(store))
    store.close()


def test_a_shadow_refuses_routing_settings_and_its_comparisons_are_not_routed():
    with pytest.raises(ValueError, match="Shadow takes no review_sample_rate: its comparisons are never routed"):
        judgehooks.Shadow(instructions="Be terse.", judge_model="openai/other", review_sample_rate=0.5)
    shadow = judgehooks.Shadow(instructions="Be terse.", judge_model="openai/other", store=judgehooks.MemoryStore())
    assert shadow._pipeline.review is None


def test_routing_settings_are_checked_by_name():
    with pytest.raises(ValueError, match="review_sample_rate must be a number >= 0 and <= 1, got 1.5"):
        Contains("x", review_sample_rate=1.5)
    with pytest.raises(ValueError, match="review_margin must be a number >= 0, got -1"):
        Contains("x", review_margin=-1)


def test_the_rule_reads_only_verdicts_and_well_formed_votes():
    review = Review(margin=None, sample_rate=0.0)
    assert review.reason("id", None, None, None, {"votes": {"passed": 1, "failed": 1}}) is None  # no verdict
    assert review.reason("id", True, None, None, {"votes": {"passed": "1", "failed": 1}}) is None  # not counts
    assert review.reason("id", True, None, None, {"votes": {"passed": 3, "failed": 0}}) is None
    assert Review(sample_rate=1.0).reason("not-hex-at-all", True, None, None, {}) == "audit sample (100%)"


@pytest.fixture
def routed_store(make_judge, make_agent, tmp_path):
    """Three live runs: a plain failure (newest), a routed pass and a routed failure."""
    store = SQLiteStore(tmp_path / "evals.db")
    agent = make_agent(numeric(make_judge, store, review_margin=1))
    routed_pass = agent.run("close pass [[score=8]]")
    routed_fail = agent.run("close fail [[score=6]]")
    plain_fail = agent.run("clear fail [[score=1]]")
    yield store, {"routed_pass": routed_pass.run_id, "routed_fail": routed_fail.run_id,
                  "plain_fail": plain_fail.run_id}
    store.close()


def test_judgehooks_review_takes_routed_records_first_and_shows_why(routed_store):
    store, runs = routed_store
    done = run_cli("review", "--store", store.path, "--by", "ann", stdin="p\np\np\n")
    assert done.returncode == 0, done.stderr
    at = {name: done.stdout.index(_record_of(store, run_id)) for name, run_id in runs.items()}
    assert max(at["routed_pass"], at["routed_fail"]) < at["plain_fail"]  # the newest, yet last
    assert "routed to review: score 8 within 1 of the threshold 7" in done.stdout
    assert "routed to review: score 6 within 1 of the threshold 7" in done.stdout


def _record_of(store: SQLiteStore, run_id: str) -> str:
    return next(r.id for r in records(store) if r.run_id == run_id)


def test_the_review_page_takes_routed_records_first_and_shows_why(routed_store):
    store, runs = routed_store
    client = TestClient(app(store, reviewer="ann"), base_url="http://127.0.0.1:8765")
    page = client.get("/review")
    assert page.status_code == 200
    first = next(r for r in records(store) if r.id in page.text)
    assert first.run_id in (runs["routed_pass"], runs["routed_fail"])
    assert f'<dd class="routed">{first.review_reason}</dd>' in page.text
    only_failed = client.get("/review?queue=failed")
    assert _record_of(store, runs["plain_fail"]) in only_failed.text or _record_of(
        store, runs["routed_fail"]) in only_failed.text
    detail = client.get(f"/records/{first.id}")
    assert "routed to review" in detail.text and first.review_reason in detail.text
