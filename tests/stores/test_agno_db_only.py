"""`db=` without `store=`: agno's db is the only store, and no file of ours appears in the working
directory, inline or in the background. The outbox (and spill) of such a store lives in the
per-user state folder, where `judgehooks resume --store agno+sqlite:///...` finds it."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from _outbox import pending
from _runner import run_cli
from agno.db.sqlite import SqliteDb

import judgehooks
from judgehooks import AgentAsJudgeEval
from judgehooks._base.context import EvalContext, context_to_dict
from judgehooks._base.record import record_id
from judgehooks._base.urls import spec_without_credentials
from judgehooks._grading.outbox import Job, Outbox
from judgehooks.stores import AgnoDbStore
from judgehooks.stores._sqlite import outbox_path_for


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory, and a state folder of this test's own."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("JUDGEHOOKS_DB", raising=False)
    monkeypatch.delenv("JUDGEHOOKS_OUTBOX", raising=False)
    return folder


def _judge(server, db, name="helpful", **kw) -> AgentAsJudgeEval:
    kw.setdefault("timeout", 10)
    return AgentAsJudgeEval(name=name, criteria="The answer echoes the question.", model="openai/judge",
                            api_base=server.base_url, api_key="test-key", retry_backoff=0.01, db=db, **kw)


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_with_db_and_no_store_the_agno_db_is_the_only_store_and_the_cwd_stays_empty(
        server, make_agent, cwd, tmp_path, background):
    db = SqliteDb(db_file=str(tmp_path / "data" / "agno.db"))
    judge = _judge(server, db, run_in_background=background)
    agent = make_agent(judge, db=db, name="support")
    agent.run("first question")
    asyncio.run(agent.arun("second question"))
    assert judgehooks.drain(30)
    assert sorted(os.listdir(cwd)) == []  # no ./judgehooks.db, no ./judgehooks.outbox.db
    assert isinstance(judge.store, AgnoDbStore)  # agno's db, and nothing beside it
    runs = db.get_eval_runs()
    assert len(runs) == 2 and {r.agent_id for r in runs} == {agent.id}
    records = asyncio.run(judge.store.query())
    assert sorted(r.input for r in records) == ["first question", "second question"]
    # what we keep of our own (the background outbox, the spill when agno's db is down) is in the
    # per-user state folder
    from judgehooks._base.statedir import state_dir

    assert state_dir() == tmp_path / "state" / "judgehooks"
    kept = [p.name for p in state_dir().glob("*.db")]
    assert kept == ([Path(outbox_path_for(judge.store)).name] if background else [])


def test_an_agno_db_named_on_the_command_line_has_the_same_outbox_as_in_the_application(cwd, tmp_path):
    path = tmp_path / "data" / "agno.db"
    in_app = AgnoDbStore(SqliteDb(db_file=str(path)))
    from judgehooks.stores import store_from_url

    os.chdir(path.parent.parent)  # the command run elsewhere, naming the file by another path
    from_cli = store_from_url(f"agno+sqlite:///{os.path.relpath(path)}")
    assert outbox_path_for(from_cli) == outbox_path_for(in_app)
    from judgehooks._base.statedir import state_dir

    assert Path(outbox_path_for(in_app)).parent == state_dir()
    other = AgnoDbStore(SqliteDb(db_file=str(tmp_path / "other.db")))
    assert outbox_path_for(other) != outbox_path_for(in_app)  # each store its own: no job reaches another's


@pytest.mark.slow  # resume grades in a judge helper process
def test_judgehooks_resume_finds_the_jobs_a_dead_process_left_for_an_agno_db(server, cwd, tmp_path):
    path = tmp_path / "data" / "agno.db"
    db = SqliteDb(db_file=str(path))
    judge = _judge(server, db, name="left-behind", timeout=60)
    # What a process with `db=` and run_in_background=True left when it died: one job in its outbox.
    outbox = Outbox(outbox_path_for(AgnoDbStore(db)))
    ctx = EvalContext(input="what is 2+2?", output="4", run_id="run-left", agent_id="support")
    outbox.put(Job(id=record_id("left-behind", "run-left", version=judge.evaluator_version),
                   evaluator="left-behind",
                   context=context_to_dict(ctx), spec=json.dumps(spec_without_credentials(judge.spec()))))
    outbox.release()  # its process is gone
    outbox.close()
    assert sorted(os.listdir(cwd)) == []

    done = run_cli("resume", "--store", f"agno+sqlite:///{path}", "--timeout", "60", cwd=cwd,
                   env={"OPENAI_API_KEY": "test-key"})
    assert done.returncode == 0, done.stderr
    assert "all done" in done.stdout
    [run] = SqliteDb(db_file=str(path)).get_eval_runs()  # graded into the agno db the command named
    ours = run.eval_data["judgehooks"]["record"]
    assert (run.agent_id, ours["run_id"], ours["evaluator"]) == ("support", "run-left", "left-behind")
    assert pending(outbox_path_for(AgnoDbStore(db))) == 0
    assert sorted(os.listdir(cwd)) == []


def test_judgehooks_db_still_adds_its_store_beside_the_agno_db(server, make_agent, cwd, tmp_path, monkeypatch):
    """$JUDGEHOOKS_DB names a store the deployment chose: with `db=` the records go to both."""
    monkeypatch.setenv("JUDGEHOOKS_DB", str(tmp_path / "evals.db"))
    db = SqliteDb(db_file=str(tmp_path / "data" / "agno.db"))
    judge = _judge(server, db)
    make_agent(judge).run("q")
    assert len(db.get_eval_runs()) == 1
    assert len(judgehooks.SQLiteStore(str(tmp_path / "evals.db")).query_sync()) == 1
    assert sorted(os.listdir(cwd)) == []
