"""$JUDGEHOOKS_DB, the store used when none is given: one meaning in the library and in every command."""

from __future__ import annotations

import json

import pytest
from _runner import run_cli

from judgehooks import AgentAsJudgeEval, SQLiteStore


def _graded_run(server, make_agent) -> str:
    """One real agno run graded into the default store (no store= given)."""
    judge = AgentAsJudgeEval(criteria="c", name="env", model="openai/judge", api_base=server.base_url,
                             api_key="k", timeout=60, retry_backoff=0.01)
    out = make_agent(judge, id="agent-env").run("q")
    return str(out.run_id)


def _reported(value: str) -> dict:
    done = run_cli("report", "--since", "all", "--json", env={"JUDGEHOOKS_DB": value})
    assert done.returncode == 0, done.stderr
    [group] = json.loads(done.stdout)["groups"]
    return dict(group)


@pytest.mark.parametrize("form", ["sqlite URL", "bare path"])
def test_the_library_stores_where_judgehooks_db_says_and_report_reads_it_there(server, make_agent, tmp_path,
                                                                                monkeypatch, form):
    db = tmp_path / "x.db"
    value = f"sqlite:///{db}" if form == "sqlite URL" else str(db)
    monkeypatch.setenv("JUDGEHOOKS_DB", value)
    run_id = _graded_run(server, make_agent)
    [record] = SQLiteStore(db).query_sync(limit=None)
    assert (record.run_id, record.status, record.evaluator) == (run_id, "passed", "env")
    group = _reported(value)
    assert (group["id"], group["evaluator"], group["count"], group["passed"]) == ("agent-env", "env", 1, 1)


def test_a_jsonl_url_in_judgehooks_db_is_read_alike_by_the_library_and_report(server, make_agent, tmp_path,
                                                                               monkeypatch):
    path = tmp_path / "x.jsonl"
    value = f"jsonl:///{path}"
    monkeypatch.setenv("JUDGEHOOKS_DB", value)
    run_id = _graded_run(server, make_agent)
    [line] = path.read_text().splitlines()
    assert json.loads(line)["run_id"] == run_id
    assert _reported(value)["count"] == 1


def test_a_bad_judgehooks_db_is_one_clear_error_naming_it_in_the_library_and_the_cli(monkeypatch):
    monkeypatch.setenv("JUDGEHOOKS_DB", "mysql://db/evals")
    with pytest.raises(ValueError, match=r"\$JUDGEHOOKS_DB='mysql://db/evals': unsupported store URL scheme 'mysql'"):
        AgentAsJudgeEval(criteria="c")  # at construction, not inside a hook agno would swallow
    done = run_cli("report", env={"JUDGEHOOKS_DB": "mysql://db/evals"})
    assert done.returncode != 0 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "$JUDGEHOOKS_DB" in line and "unsupported store URL scheme 'mysql'" in line
