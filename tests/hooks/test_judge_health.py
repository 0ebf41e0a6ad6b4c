"""A judge whose health is watched (issue 44, item 3): `golden=` (cases people labelled, as
`judgehooks export --labelled` writes them) and `canaries=` (answers planted to be wrong) are graded
in the background when a live run first meets an evaluator version, and again every `health_every`;
one health record per check, alerting through `on_fail` and the notifiers when the kappa is below
`golden_min_kappa` or a canary passed; `judgehooks judge-health` prints the history and exits non-zero
when the last check failed. Real agno agents over the loopback stub judge (which fails an answer
holding ``[[fail]]``), real SQLite, a real webhook receiver."""

from __future__ import annotations

import functools
import json
import sys
import textwrap

import pytest
from _runner import run_cli

import judgehooks
from judgehooks import SQLiteStore, WebhookNotifier
from judgehooks._runtime import runtime
from judgehooks.testing import WebhookReceiver

GOLDEN = [{"id": "g-ok-1", "input": "capital of France?", "output": "Paris", "passed": True},
          {"id": "g-ok-2", "input": "2 + 2?", "output": "4", "passed": True},
          {"id": "g-bad-1", "input": "capital of Spain?", "output": "Lisbon [[fail]]", "passed": False},
          {"id": "g-bad-2", "input": "3 + 3?", "output": "7 [[fail]]", "passed": False}]
CANARIES = [{"id": "c-1", "input": "boiling point of water?", "output": "20 degrees [[fail]]"},
            {"id": "c-2", "input": "largest planet?", "output": "Mars [[fail]]"}]
#: a canary the stub judge passes: the judge is fooled by it
FOOLING = {"id": "c-fools", "input": "who wrote Hamlet?", "output": "Tolstoy"}


def records(store: SQLiteStore, **filters) -> list[judgehooks.EvalRecord]:
    return runtime.call(functools.partial(store.query, limit=None, **filters))


def jsonl(path, lines) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_a_live_run_starts_the_first_check_and_a_healthy_judge_passes(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    judge = make_judge(store=store, name="helpful", golden=jsonl(tmp_path / "golden.jsonl", GOLDEN),
                       canaries=jsonl(tmp_path / "canaries.jsonl", CANARIES))
    agent = make_agent(judge)
    agent.run("hello")
    assert judgehooks.drain(30)
    (health,) = records(store, evaluator="helpful:health")
    assert (health.status, health.scope, health.score, health.threshold) == ("passed", "health", 1.0, 0.6)
    assert health.evaluator_version == judge.evaluator_version
    assert health.details["golden"]["confusion"] == {"tp": 2, "fp": 0, "fn": 0, "tn": 2}
    assert health.details["canaries"] == {"source": str(tmp_path / "canaries.jsonl"), "cases": 2, "caught": 2,
                                          "passed": [], "catch_rate": 1.0}
    assert health.reason == "kappa 1.00 (min 0.6) over 4 golden cases; 2 of 2 canaries caught"
    assert [r.scope for r in records(store, evaluator="helpful")] == ["run"]  # the golden cases are not stored
    agent.run("hello again")  # the same version, and no health_every: checked once
    assert judgehooks.drain(30)
    assert len(records(store, evaluator="helpful:health")) == 1
    store.close()


def test_a_canary_that_passes_alerts_through_on_fail_and_the_notifiers(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    seen = []
    with WebhookReceiver() as receiver:
        judge = make_judge(store=store, name="gullible", golden=GOLDEN, canaries=[*CANARIES, FOOLING],
                           on_fail=WebhookNotifier(receiver.url), on_record=seen.append)
        make_agent(judge).run("hello")
        assert judgehooks.drain(30)
        (health,) = records(store, evaluator="gullible:health")
        assert health.status == "failed" and health.passed is False
        assert health.details["canaries"]["passed"] == ["c-fools"]
        assert health.reason.startswith("1 of 3 canaries passed: c-fools")
        assert [r.id for r in seen if r.status == "failed"] == [health.id]
        (posted,) = receiver.posts
        assert (posted["evaluator"], posted["status"], posted["scope"]) == ("gullible:health", "failed", "health")
    done = run_cli("judge-health", "--store", store.path, "--evaluator", "gullible")
    assert done.returncode == 1
    assert "last check: UNHEALTHY: 1 of 3 canaries passed: c-fools" in done.stdout
    store.close()


def test_a_judge_that_disagrees_with_the_labels_fails_on_kappa(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    flipped = [{**case, "passed": not case["passed"]} for case in GOLDEN]  # people said the opposite
    make_agent(make_judge(store=store, name="contrary", golden=flipped, golden_min_kappa=0.5)).run("hello")
    assert judgehooks.drain(30)
    (health,) = records(store, evaluator="contrary:health")
    assert (health.status, health.score) == ("failed", -1.0)
    assert health.reason.startswith("kappa -1.00 is below golden_min_kappa 0.5")
    store.close()


def test_a_judge_that_cannot_answer_gives_an_error_record_never_a_failure(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    errors = []
    down = [{**case, "input": case["input"] + " [[judge_status=500]]"} for case in GOLDEN]
    make_agent(make_judge(store=store, name="down", golden=down, retries=0, on_error=errors.append)).run("hello")
    assert judgehooks.drain(30)
    (health,) = records(store, evaluator="down:health")
    assert (health.status, health.passed, health.error_type) == ("error", None, "JudgeHealthError")
    assert "no case of the health check was graded (4 errors" in health.error_message
    assert [r.id for r in errors if r.scope == "health"] == [health.id]
    store.close()


def test_a_new_version_is_checked_again_with_the_change_from_the_last(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    judge = make_judge(store=store, name="evolving", golden=GOLDEN, canaries=CANARIES)
    agent = make_agent(judge)
    agent.run("hello")
    assert judgehooks.drain(30)
    first = judge.evaluator_version
    judge.criteria = "The answer is correct and polite."  # a new version of the judge
    assert judge.evaluator_version != first
    agent.run("hello")
    assert judgehooks.drain(30)
    newest, older = records(store, evaluator="evolving:health")
    assert (older.evaluator_version, newest.evaluator_version) == (first, judge.evaluator_version)
    assert newest.details["previous"] == {"version": first, "kappa": 1.0, "change": 0.0}
    assert "change from version" in newest.reason
    store.close()


def test_health_every_checks_again_when_the_window_has_passed(make_judge, make_agent, tmp_path, monkeypatch):
    import judgehooks._hooks.health as health

    store = SQLiteStore(tmp_path / "evals.db")
    judge = make_judge(store=store, name="scheduled", canaries=CANARIES, health_every="1h")
    agent = make_agent(judge)
    agent.run("hello")
    assert judgehooks.drain(30)
    agent.run("hello")  # within the hour: not again
    assert judgehooks.drain(30)
    assert len(records(store, evaluator="scheduled:health")) == 1
    clock = health.time.time() + 3700
    monkeypatch.setattr(health.time, "time", lambda: clock)  # an hour on: the record is old, the window new
    monkeypatch.setattr(health, "datetime", _later(3700))
    judge._shell.health._due_at = 0.0  # the process's own timer, as an hour passing leaves it
    agent.run("hello")
    assert judgehooks.drain(30)
    assert len(records(store, evaluator="scheduled:health")) == 2
    store.close()


def _later(seconds: float):
    from datetime import datetime, timedelta

    class Later(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.now(tz) + timedelta(seconds=seconds)

    return Later


def test_check_health_now_and_the_cli_gate_with_check(make_judge, server, tmp_path, monkeypatch):
    store = SQLiteStore(tmp_path / "evals.db")
    judge = make_judge(store=store, name="gated", golden=GOLDEN, canaries=CANARIES)
    assert judge.check_health().status == "passed"
    module = tmp_path / "judge_app.py"
    module.write_text(textwrap.dedent(f"""
        import os
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        from judgehooks import AgentAsJudgeEval, SQLiteStore
        judge = AgentAsJudgeEval(name="gated", criteria="The answer echoes the question.", model="openai/judge",
                                 api_base={server.base_url!r}, api_key="test-key", store=SQLiteStore({store.path!r}),
                                 golden={GOLDEN!r}, canaries={[*CANARIES, FOOLING]!r})
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    done = run_cli("judge-health", "--store", store.path, "--evaluator", "gated", "--check", "judge_app:judge")
    assert done.returncode == 1, done.stderr  # the module's judge is fooled by a canary
    assert "judgehooks judge-health: gated: 2 check(s), newest first" in done.stdout
    rows = json.loads(run_cli("judge-health", "--store", store.path, "--evaluator", "gated", "--json").stdout)
    assert [r["status"] for r in rows] == ["failed", "passed"]
    assert rows[0]["canaries_passed"] == ["c-fools"]
    sys.modules.pop("judge_app", None)
    store.close()


def test_the_cli_says_when_there_is_no_check_and_fails(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    records(store)  # the store's file, empty
    done = run_cli("judge-health", "--store", store.path, "--evaluator", "nobody")
    assert done.returncode != 0 and "no health check of 'nobody'" in done.stderr
    store.close()


def test_bad_golden_and_canaries_are_refused_naming_the_line(make_judge, tmp_path):
    bad = tmp_path / "golden.jsonl"
    bad.write_text(json.dumps(GOLDEN[0]) + "\n" + json.dumps({"input": "q", "output": "a"}) + "\n")
    with pytest.raises(ValueError, match=r"golden=.*line 2: a golden case needs its label"):
        make_judge(golden=str(bad))
    with pytest.raises(ValueError, match=r"canaries\[0\]: a canary is an answer planted to be wrong"):
        make_judge(canaries=[{"input": "q", "output": "a", "passed": True}])
    with pytest.raises(ValueError, match=r"golden=.*x.jsonl:1: not JSON"):
        make_judge(golden=str(_write(tmp_path / "x.jsonl", "{nope\n")))
    with pytest.raises(ValueError, match="health_every must be a duration of at least a minute"):
        make_judge(canaries=CANARIES, health_every="10s")
    with pytest.raises(ValueError, match="golden_min_kappa must be a number >= -1 and <= 1"):
        make_judge(golden=GOLDEN, golden_min_kappa=2)
    with pytest.raises(ValueError, match="has no golden= or canaries="):
        make_judge().check_health()


def _write(path, text):
    path.write_text(text)
    return path


def test_export_labelled_writes_a_golden_set_the_judge_reads(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    agent = make_agent(make_judge(store=store, name="live"))
    good, bad = agent.run("hello"), agent.run("hello [[fail]]")
    by_run = {r.run_id: r for r in records(store)}
    judgehooks.label(by_run[good.run_id].id, passed=True, by="ann", store=store)
    judgehooks.label(by_run[bad.run_id].id, passed=False, by="ann", store=store)
    golden = tmp_path / "golden.jsonl"
    done = run_cli("export", "--store", store.path, "--labelled", "-o", golden)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in golden.read_text().splitlines()]
    assert sorted(line["passed"] for line in lines) == [False, True]
    checked = make_judge(store=store, name="live", golden=str(golden)).check_health()
    assert checked.status == "passed" and checked.details["golden"]["graded"] == 2
    store.close()


def test_health_records_stay_out_of_the_review_queue_and_exports(make_judge, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    record = make_judge(store=store, name="x", canaries=[FOOLING]).check_health()
    assert record.status == "failed"
    review = run_cli("review", "--store", store.path, "--by", "ann", stdin="q\n")
    assert "nothing to review" in review.stdout
    export = run_cli("export", "--store", store.path)
    assert export.returncode == 0 and export.stdout == ""
    store.close()
