"""`judgehooks shadow-report`: a Shadow's comparisons read back from a real store, as text and JSON."""

from __future__ import annotations

import json

from _shadow import GOOD, POOR, PairwiseJudge, agent, shadow

import judgehooks
from judgehooks import SQLiteStore
from judgehooks._cli import main


def test_shadow_report_prints_the_decision_and_segments_by_user_and_metadata(server, tmp_path, capsys):
    PairwiseJudge(server)
    db = tmp_path / "shadow.db"
    ev = shadow(server, SQLiteStore(db), agent(server, GOOD, name="candidate"), name="new-prompt")
    live = agent(server, POOR, ev)
    for i in range(10):
        live.run(f"question {i}", user_id=f"user-{i % 2}", metadata={"plan": "pro" if i < 4 else "free"})
    assert judgehooks.drain(30)
    capsys.readouterr()

    assert main(["shadow-report", "--store", str(db), "--name", "new-prompt", "--by", "user_id", "--by", "plan",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["comparisons"], data["wins"], data["losses"], data["ties"]) == (10, 10, 0, 0)
    assert data["decision"] == "promote" and data["p_value"] < 0.05 and data["interval"][0] > 0.5
    assert {k: v["comparisons"] for k, v in data["segments"]["plan"].items()} == {"free": 6, "pro": 4}
    assert {k: v["wins"] for k, v in data["segments"]["user_id"].items()} == {"user-0": 5, "user-1": 5}

    assert main(["shadow-report", "--store", str(db), "--name", "new-prompt"]) == 0
    text = capsys.readouterr().out
    assert "decision: promote" in text and "by user_id" in text and "95% CI" in text


def test_shadow_report_on_a_name_with_no_records_says_not_enough_data(tmp_path, capsys):
    db = tmp_path / "empty.db"
    SQLiteStore(db).query_sync(limit=1)
    assert main(["shadow-report", "--store", str(db), "--name", "nothing-yet", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["comparisons"] == 0 and data["decision"] == "not enough data" and data["needed"] == 6


def test_a_changed_candidate_is_a_new_version_never_pooled_with_the_old(server, tmp_path, capsys):
    PairwiseJudge(server)
    db = tmp_path / "versions.db"
    old = shadow(server, SQLiteStore(db), agent(server, POOR, name="candidate"), name="v")
    for i in range(3):
        agent(server, POOR, old).run(f"old {i}")
    assert judgehooks.drain(30)
    new = shadow(server, SQLiteStore(db), agent(server, GOOD, name="candidate-2"), name="v")
    for i in range(7):
        agent(server, POOR, new).run(f"new {i}")
    assert judgehooks.drain(30)
    capsys.readouterr()
    assert main(["shadow-report", "--store", str(db), "--name", "v", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == new.evaluator_version != old.evaluator_version
    assert (data["comparisons"], data["wins"], data["ties"]) == (7, 7, 0) and len(data["versions"]) == 2
    assert main(["shadow-report", "--store", str(db), "--name", "v", "--evaluator-version", old.evaluator_version,
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ties"] == 3
    assert main(["shadow-report", "--store", str(db), "--name", "v", "--evaluator-version", "nope"]) == 2
    assert "no records of version 'nope'" in capsys.readouterr().err
