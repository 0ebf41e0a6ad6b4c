"""$JUDGEHOOKS_DB, the store used when none is given: one meaning in the library and in every command."""

from __future__ import annotations

import json

import pytest
from _runner import run_cli

from judgehooks import (
    AgentAsJudgeEval,
    Contains,
    Criterion,
    Group,
    Rubric,
    SessionJudge,
    SQLiteStore,
    end_session,
    evaluator,
)


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


def _kind(name: str, server, **deploy):
    """One evaluator of each kind users build, with no store= (the default store), judged by the stub."""
    judge = dict(model="openai/judge", api_base=server.base_url, api_key="k", retry_backoff=0.01, timeout=20)
    if name == "AgentAsJudgeEval":
        return AgentAsJudgeEval(criteria="c", name=name, **judge, **deploy)
    if name == "Rubric":
        return Rubric([Criterion("c", "c")], name=name, **judge, **deploy)
    if name == "SessionJudge":
        return SessionJudge(criteria="c", name=name, idle_after=300, **judge, **deploy)
    if name == "check":
        return Contains("q", name=name, **deploy)
    if name == "function":
        return evaluator(lambda ctx: True, name=name, **deploy)
    return Group([Contains("q", name="member")], name=name, **deploy)  # a composite


KINDS = ("AgentAsJudgeEval", "Rubric", "SessionJudge", "check", "function", "composite")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("value", ["{missing}/x.db", "sqlite:/x.db", "jsonl:///{missing}/x.jsonl"])
def test_a_judgehooks_db_whose_folder_is_missing_fails_at_construction_for_every_kind_inline_or_not(
        server, make_agent, tmp_path, monkeypatch, kind, value):
    """An inline evaluator builds its store on its first run, inside agno's post-hook, which swallows
    errors: the run's verdict was lost with no record, no on_error, empty stats. Every evaluator kind
    now refuses the setting where it is built, naming $JUDGEHOOKS_DB and the path, as a background
    one did; and the same kind over a folder that exists grades a real agent's run into it."""
    value = value.format(missing=tmp_path / "missing")
    monkeypatch.setenv("JUDGEHOOKS_DB", value)
    for background in (False, True):
        with pytest.raises(ValueError) as refused:
            _kind(kind, server, run_in_background=background)
        said = str(refused.value)
        assert said.startswith(f"$JUDGEHOOKS_DB={value!r}: "), said
        assert "does not exist" in said, said
    if value.startswith("sqlite:/x"):
        assert "sqlite:///x.db" in said  # how the URL was meant to be written

    (tmp_path / "missing").mkdir()
    good = f"sqlite:///{tmp_path / 'x.db'}" if value.startswith("sqlite:/x") else value
    monkeypatch.setenv("JUDGEHOOKS_DB", good)
    errors: list = []
    agent = make_agent(_kind(kind, server, on_error=errors.append), id="agent-env")
    run_id = agent.run("q", session_id="s-env").run_id
    if kind == "SessionJudge":
        end_session("s-env", kind)
    path = good.partition(":///")[2] if "://" in good else good
    if path.endswith(".jsonl"):
        [line] = (tmp_path / "missing" / "x.jsonl").read_text().splitlines()
        stored = [json.loads(line)]
    else:
        stored = [r.model_dump() for r in SQLiteStore(path).query_sync(limit=None)]
    assert [(r["evaluator"], r["status"]) for r in stored] == [(kind, "passed")], (stored, errors)
    assert run_id in (stored[0]["run_id"], *(stored[0].get("run_ids") or ()))
