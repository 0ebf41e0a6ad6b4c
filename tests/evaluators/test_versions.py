"""Evaluator versions: a stable hash of what decides a verdict, on every record, in every store,
and `judgehooks report` keeping versions apart."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest
from _runner import CliResult, run_cli

import judgehooks
from judgehooks import (
    AgentAsJudgeEval,
    Criterion,
    Group,
    JsonlStore,
    MemoryStore,
    Regex,
    Rubric,
    SQLiteStore,
    evaluator,
)
from judgehooks._base.record import FIELDS
from judgehooks._evaluators import version as version_module
from judgehooks._judges import prompt as prompt_module
from judgehooks.stores._agno import eval_run_payload

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def judge(**kw):
    settings = {"criteria": "Answers the question", "model": "openai/judge-a", "api_base": "http://127.0.0.1:9/v1",
                "api_key": "k", "store": MemoryStore()}
    settings.update(kw)
    return AgentAsJudgeEval(**settings)


def cli(*args: str) -> CliResult:
    return run_cli(*args)


# ---- the hash -------------------------------------------------------------------------------------

BUILD = """
import json
from judgehooks import AgentAsJudgeEval, Group, MemoryStore, Regex, Rubric
j = AgentAsJudgeEval(criteria="Answers the question", model="openai/judge-a", api_base="http://127.0.0.1:9/v1",
                     api_key="k", store=MemoryStore(), scoring_strategy="numeric", threshold=8,
                     additional_guidelines=["be strict"])
r = Regex(r"\\d+", store=MemoryStore())
g = Group([r, Regex("x", name="x")], store=MemoryStore())
u = Rubric([{"name": "facts", "description": "no made-up facts"}], model="openai/judge-a", store=MemoryStore())
print(json.dumps([j.evaluator_version, r.evaluator_version, g.evaluator_version, u.evaluator_version]))
"""


def test_the_version_is_the_same_in_another_process():
    done = subprocess.run([sys.executable, "-c", BUILD], capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    namespace: dict[str, object] = {}
    exec(BUILD.replace("print(", "result = ("), namespace)
    theirs = json.loads(done.stdout)
    assert theirs == json.loads(str(namespace["result"]))
    assert all(isinstance(v, str) and len(v) == 12 for v in theirs) and len(set(theirs)) == 4


@pytest.mark.parametrize("change", [
    {"criteria": "Answers the question politely"},
    {"model": "openai/judge-b"},
    {"scoring_strategy": "numeric", "threshold": 7},
    {"additional_guidelines": "cite sources"},
    {"include_tool_calls": True},
    {"context_key": "docs"},
    {"temperature": 0.5},
])
def test_each_input_that_decides_a_verdict_changes_the_version(change):
    assert judge(**change).evaluator_version != judge().evaluator_version


def test_the_threshold_changes_a_numeric_judges_version():
    assert judge(scoring_strategy="numeric", threshold=7).evaluator_version != \
        judge(scoring_strategy="numeric", threshold=8).evaluator_version


@pytest.mark.parametrize("same", [
    {"name": "renamed"}, {"api_key": "other"}, {"api_base": "http://127.0.0.1:10/v1"}, {"timeout": 3},
    {"retries": 5}, {"store": MemoryStore()}, {"sample_rate": 0.5}, {"on_error": print},
])
def test_how_a_judge_is_reached_named_or_deployed_leaves_the_version(same):
    assert judge(**same).evaluator_version == judge().evaluator_version


def test_the_prompt_template_text_is_part_of_the_version(monkeypatch):
    before = judge().evaluator_version
    monkeypatch.setitem(prompt_module._REPLY_FORMAT, "binary", prompt_module._REPLY_FORMAT["binary"] + " Be brief.")
    assert judge().evaluator_version != before


class MaxWords(judgehooks.Evaluator):
    def evaluate(self, ctx):
        return len(ctx.output.split()) <= 50


def test_the_source_of_an_evaluator_class_written_outside_judgehooks_is_part_of_its_version(monkeypatch):
    before = MaxWords().evaluator_version
    assert MaxWords().evaluator_version == before
    monkeypatch.setattr(version_module, "source_of", lambda obj: "def evaluate(self, ctx): return True")
    assert MaxWords().evaluator_version != before


def test_assigning_a_setting_gives_a_new_version():
    ev = judge()
    before = ev.evaluator_version
    ev.criteria = "Something else"
    assert ev.evaluator_version not in (before, None)
    ev.criteria = "Answers the question"
    assert ev.evaluator_version == before


def test_checks_rubrics_functions_and_composites_have_versions_that_follow_their_parts():
    assert Regex("a+").evaluator_version != Regex("b+").evaluator_version
    assert Regex("a+").evaluator_version != Regex("a+", must_match=False).evaluator_version
    assert Rubric({"facts": "no made-up facts"}, model="openai/m").evaluator_version != \
        Rubric([Criterion("facts", "no made-up facts", weight=2)], model="openai/m").evaluator_version

    @evaluator
    def short(ctx):
        return len(ctx.output) < 10

    @evaluator(name="short")
    def short_too(ctx):
        return len(ctx.output) < 20

    assert short.evaluator_version != short_too.evaluator_version  # the function's own code decides
    member = Regex("a+", name="m")
    group = Group([member, Regex("b", name="b")])
    before = group.evaluator_version
    assert Group([Regex("a+", name="m"), Regex("b", name="b")]).evaluator_version == before
    member.pattern = "c+"  # a member changed after the composite was built: the composite's version follows
    assert group.evaluator_version != before


# ---- on records, in stores -------------------------------------------------------------------------

def test_every_record_carries_its_evaluators_version(make_judge, store):
    ev = make_judge(scoring_strategy="numeric")
    result = ev.run(cases=[{"input": "q [[score=9]]", "output": "a"}, {"input": "q [[judge_status=500]]",
                                                                       "output": "a"}])
    assert {r.status for r in result.results} == {"passed", "error"}
    assert {r.evaluator_version for r in store.records} == {ev.evaluator_version}


def test_sqlite_and_jsonl_store_the_version_and_an_old_sqlite_table_gains_the_column(make_judge, tmp_path):
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)  # a table as an older judgehooks wrote it: no evaluator_version column
    columns = [f for f in FIELDS if f not in ("evaluator_version", "rejudge_of")]
    conn.execute(f"CREATE TABLE eval_records ({', '.join(columns)})")
    conn.execute("INSERT INTO eval_records (id, created_at, status, evaluator, mode, metadata, details, passed, input, "
                 "output, attempts, sample_rate) VALUES ('old-1', '2026-01-01T00:00:00.000000+00:00', 'passed', 'e', "
                 "'binary', '{}', '{}', 1, 'q', 'a', 1, 1.0)")
    conn.commit()
    conn.close()
    for store in (SQLiteStore(old), JsonlStore(tmp_path / "evals.jsonl")):
        ev = make_judge(store=store)
        ev.run(input="q", output="a")
        found = {r.id: r.evaluator_version for r in store.query_sync(limit=None)} if isinstance(store, SQLiteStore) \
            else {r.id: r.evaluator_version for r in judgehooks._runtime.runtime.call(store.query)}
        assert ev.evaluator_version in found.values()
        if isinstance(store, SQLiteStore):
            assert found["old-1"] is None  # old rows read back, unversioned
            store.close()


def test_postgres_stores_the_version(make_judge, postgres_dsn):
    from judgehooks import PostgresStore

    store = PostgresStore(postgres_dsn)
    ev = make_judge(store=store)
    ev.run(input="q", output="a")
    [record] = judgehooks._runtime.runtime.call(store.query)
    assert record.evaluator_version == ev.evaluator_version


def test_the_agno_db_keeps_the_version_in_eval_data(make_judge, tmp_path):
    from agno.db.sqlite import SqliteDb

    db = SqliteDb(db_file=str(tmp_path / "agno.db"))
    ev = make_judge(db=db)
    result = ev.run(input="q", output="a")  # an offline batch: one eval run holding its cases
    batch = db.get_eval_run(result.run_id).eval_data["judgehooks"]["batch"]
    assert batch["evaluator_version"] == ev.evaluator_version
    [record] = result.results  # a live hook's eval run, one per record
    assert eval_run_payload(record)["judgehooks"]["record"]["evaluator_version"] == ev.evaluator_version


# ---- report ----------------------------------------------------------------------------------------

@pytest.fixture
def two_versions(make_judge, tmp_path):
    """One evaluator name, graded under two criteria: two versions in one window."""
    db = tmp_path / "evals.db"
    store = SQLiteStore(db)
    old = make_judge(name="helpful", criteria="Answers the question", store=store)
    old.run(cases=[{"input": f"q{i}", "output": "a"} for i in range(3)])
    new = make_judge(name="helpful", criteria="Answers the question with a source", store=store)
    new.run(cases=[{"input": "q [[fail]]", "output": "a"}, {"input": "q", "output": "a"}])
    store.close()
    return db, old.evaluator_version, new.evaluator_version


def test_report_keeps_versions_apart_and_warns_naming_them(two_versions):
    db, old, new = two_versions
    text = cli("report", "--store", str(db), "--since", "all")
    assert text.returncode == 0, text.stderr
    assert f"helpful@{old}" in text.stdout and f"helpful@{new}" in text.stdout
    assert f"warning: helpful (offline) changed in this window: versions {', '.join(sorted([old, new]))}" \
        in text.stdout
    report = json.loads(cli("report", "--store", str(db), "--since", "all", "--json").stdout)
    rates = {g["evaluator_version"]: g["pass_rate"] for g in report["groups"]}
    assert rates == {old: 1.0, new: 0.5}
    assert report["mixed_versions"] == [{"kind": "offline", "id": None, "name": None, "evaluator": "helpful",
                                         "versions": sorted([old, new])}]


def test_report_all_versions_pools_them_without_a_warning(two_versions):
    db, old, new = two_versions
    text = cli("report", "--store", str(db), "--since", "all", "--all-versions")
    assert "warning" not in text.stdout and "@" not in text.stdout
    report = json.loads(cli("report", "--store", str(db), "--since", "all", "--all-versions", "--json").stdout)
    [group] = report["groups"]
    assert (group["count"], group["pass_rate"], group["versions"]) == (5, 0.8, sorted([old, new]))


def test_one_version_in_the_window_gives_no_warning(make_judge, tmp_path):
    db = tmp_path / "one.db"
    make_judge(name="helpful", store=SQLiteStore(db)).run(input="q", output="a")
    done = cli("report", "--store", str(db), "--since", "all")
    assert "warning" not in done.stdout and "helpful@" not in done.stdout
    rates = done.stdout.split("judge cost per evaluator per day")[0]  # the cost table lists it again
    assert textwrap.dedent(rates).count("helpful") == 1
