"""Our eval rows in an agno db have agno's own shape, with everything we add under one key,
``eval_data["judgehooks"]``: agno's `AgentAsJudgeEval` writes beside ours in the same test, on
the same stub judge, and the two rows are compared key by key. What we add still reads back
(`AgnoDbStore.query`, `judgehooks report --store agno+sqlite:///...`, labels)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _runner import run_cli
from agno.agent import Agent
from agno.db.schemas.evals import EvalRunRecord, EvalType
from agno.db.sqlite import SqliteDb
from agno.eval.agent_as_judge import AgentAsJudgeEval as AgnoEval
from agno.models.openai.like import OpenAILike

import judgehooks
from judgehooks import AgentAsJudgeEval as OurEval
from judgehooks._runtime import runtime
from judgehooks.stores import AgnoDbStore


def _shape(value: Any) -> Any:
    """The keys of nested dicts (and of a list's first item), without the values."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return None


def _rows(make: type, server, tmp_path: Path, name: str, offline: bool = False) -> tuple[SqliteDb, dict[str, Any]]:
    db = SqliteDb(db_file=str(tmp_path / f"{name}.db"))
    ev = make(name="helpful", criteria="The answer echoes the question.", scoring_strategy="numeric", threshold=7,
              model=OpenAILike(id="judge", base_url=server.base_url, api_key="k"), db=db, telemetry=False,
              show_spinner=False)
    if offline:
        ev.run(cases=[{"input": "q1 [[score=9]]", "output": "a1"}, {"input": "q2 [[score=3]]", "output": "a2"}])
    else:
        agent = Agent(model=OpenAILike(id="agent", base_url=server.base_url, api_key="k"), post_hooks=[ev],
                      telemetry=False, id="support", name="support")
        agent.run("what is 2+2? [[score=8]]")
    judgehooks.drain(30)
    [row] = db.get_eval_runs(deserialize=False)[0]
    return db, row


@pytest.mark.parametrize("offline", [False, True], ids=["post-hook", "offline-batch"])
def test_our_row_is_agnos_row_plus_one_key(server, tmp_path, monkeypatch, offline):
    monkeypatch.chdir(tmp_path)
    _, theirs = _rows(AgnoEval, server, tmp_path, "agno", offline)
    _, ours = _rows(OurEval, server, tmp_path, "ours", offline)
    assert set(ours) == set(theirs)  # the table's columns
    assert _shape(ours["eval_input"]) == _shape(theirs["eval_input"])
    added = set(ours["eval_data"]) - set(theirs["eval_data"])
    assert added == {"judgehooks"}
    agnos_part = {k: v for k, v in ours["eval_data"].items() if k != "judgehooks"}
    assert _shape(agnos_part) == _shape(theirs["eval_data"])  # agno's keys, results' six fields included
    # the values agno's readers use are the same
    for key in ("avg_score", "min_score", "max_score", "pass_rate"):
        assert ours["eval_data"][key] == theirs["eval_data"][key], key
    assert [r["passed"] for r in ours["eval_data"]["results"]] == [r["passed"] for r in theirs["eval_data"]["results"]]
    assert [r["score"] for r in ours["eval_data"]["results"]] == [r["score"] for r in theirs["eval_data"]["results"]]
    assert (ours["agent_id"], ours["name"], ours["eval_type"]) == (theirs["agent_id"], theirs["name"],
                                                                    theirs["eval_type"])
    assert set(ours["eval_data"]["judgehooks"]) == ({"batch"} if offline else {"record"})


def test_what_we_add_reads_back_from_the_one_key(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db, row = _rows(OurEval, server, tmp_path, "ours")
    store = AgnoDbStore(db)
    [record] = runtime.call(lambda: store.query(limit=None))
    assert (record.id, record.status, record.score, record.agent_id) == (row["run_id"], "passed", 8, "support")
    assert record.input == "what is 2+2? [[score=8]]"  # kept once, in agno's results
    assert "input" not in row["eval_data"]["judgehooks"]["record"]
    judgehooks.label(record.id, passed=False, by="ann", store=store)
    assert [(lb.record_id, lb.passed) for lb in runtime.call(store.read_labels)] == [(record.id, False)]
    [label_row] = [r for r in db.get_eval_runs(deserialize=False)[0] if r["run_id"] != record.id]
    assert set(label_row["eval_data"]) - set(row["eval_data"]) == set()
    assert set(label_row["eval_data"]["judgehooks"]) == {"label"}
    done = run_cli("report", "--store", f"agno+sqlite:///{tmp_path / 'ours.db'}", "--since", "all")
    assert done.returncode == 0, done.stderr
    assert "helpful" in done.stdout


def test_rows_written_before_the_one_key_still_read_back(server, tmp_path, monkeypatch):
    """An eval run an earlier release wrote (the record and labels at the top of eval_data)."""
    monkeypatch.chdir(tmp_path)
    db, row = _rows(OurEval, server, tmp_path, "ours")
    store = AgnoDbStore(db)
    [record] = runtime.call(lambda: store.query(limit=None))
    old = {k: v for k, v in row["eval_data"].items() if k != "judgehooks"}
    old["record"] = {**row["eval_data"]["judgehooks"]["record"], "id": "old-1"}
    db.create_eval_run(EvalRunRecord(run_id="old-1", eval_type=EvalType.AGENT_AS_JUDGE, eval_data=old,
                                     agent_id="support"))
    found = runtime.call(lambda: store.query(limit=None))
    assert sorted(r.id for r in found) == sorted([record.id, "old-1"])
