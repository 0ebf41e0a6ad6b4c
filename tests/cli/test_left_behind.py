"""What a process that died leaves behind, as a newcomer meets it: `judgehooks report` on a store
never written points at the outbox beside it, and `judgehooks resume` never consumes jobs whose
rebuilt judge has no key here (issue 41, items 12 and 13)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from _outbox import pending
from _runner import run_cli

from judgehooks import SQLiteStore

PRODUCER = """
import os, sys, time
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from judgehooks import AgentAsJudgeEval, SQLiteStore
base_url, db = sys.argv[1], sys.argv[2]
judge = AgentAsJudgeEval(name="keyed", criteria="c", model="openai/judge", api_base=base_url, api_key="in-code",
                         store=SQLiteStore(db), run_in_background=True)
agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="k"), post_hooks=[judge], telemetry=False)
for i in range(3):
    agent.run(f"question {i}")
print("SUBMITTED", flush=True)
time.sleep(600)
"""


def _killed_before_the_first_verdict(server, tmp_path) -> str:
    """A process with a key given in code files 3 background jobs, then dies by SIGKILL before any
    verdict: the store file was never created, the jobs wait in the outbox beside it."""
    server.configure(judge_delay_ms=60_000)  # no verdict before the kill
    script = tmp_path / "producer.py"
    script.write_text(textwrap.dedent(PRODUCER))
    db = str(tmp_path / "bg3.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    producer = subprocess.Popen([sys.executable, str(script), server.base_url, db], stdout=subprocess.PIPE,
                                text=True, env=env)
    try:
        assert producer.stdout.readline().strip() == "SUBMITTED"
        os.kill(producer.pid, signal.SIGKILL)
    finally:
        producer.wait(30)
        server.configure(judge_delay_ms=0)
    assert not os.path.exists(db) and pending(tmp_path / "bg3.outbox.db") == 3
    return db


def test_report_on_a_store_never_written_names_the_jobs_waiting_beside_it(server, tmp_path):
    db = _killed_before_the_first_verdict(server, tmp_path)
    done = run_cli("report", "--store", db)
    assert done.returncode != 0
    assert f"no such file {db!r}" in done.stderr
    assert (f"the outbox {str(tmp_path / 'bg3.outbox.db')!r} beside it holds 3 background job(s) waiting (keyed 3)"
            in done.stderr)
    assert f"judgehooks resume --store {db}" in done.stderr


def test_resume_without_the_key_leaves_the_jobs_pending_and_says_what_to_pass(server, tmp_path):
    db = _killed_before_the_first_verdict(server, tmp_path)
    without: dict[str, str | None] = {k: None for k in os.environ if k.startswith("OPENAI")}
    paid = server.settings.counts["judge"]  # the dead process's calls, never answered
    done = run_cli("resume", "--store", db, "--timeout", "60", env=without)
    assert done.returncode == 1
    assert "evaluator 'keyed': its judge model 'openai/judge' needs OPENAI_API_KEY, not set here" in done.stderr
    assert "--import MODULE" in done.stderr
    assert pending(tmp_path / "bg3.outbox.db") == 3  # not consumed
    assert server.settings.counts["judge"] == paid  # and no judge paid
    assert not os.path.exists(db) or SQLiteStore(db).query_sync(limit=None) == []
    # With the key in the environment the same command grades them, once each.
    done = run_cli("resume", "--store", db, "--timeout", "60", env={**without, "OPENAI_API_KEY": "from-env"})
    assert done.returncode == 0, done.stderr
    records = SQLiteStore(db).query_sync(limit=None)
    assert sorted(r.input for r in records) == [f"question {i}" for i in range(3)]
    assert all(r.status == "passed" for r in records) and pending(tmp_path / "bg3.outbox.db") == 0


def test_resume_names_each_evaluator_whose_stored_spec_cannot_be_rebuilt_and_grades_the_others(tmp_path):
    """Specs a process of this library never stores: not JSON, JSON but not an object, settings that
    are not an object or that the class does not take. `resume` raised on the first (a traceback,
    nothing graded, for any evaluator). Each is named, its jobs stay pending, and the rest is graded."""
    import json

    from judgehooks._base.context import EvalContext, context_to_dict
    from judgehooks._grading.outbox import Job, Outbox

    db = tmp_path / "s.db"
    outbox = Outbox(tmp_path / "s.outbox.db")
    good = json.dumps({"class": "Contains", "settings": {"values": ["q"], "name": "has-q"}})
    specs = {"has-q": good, "not-json": "{nope", "a-list": "[1, 2]", "listed-settings": '{"class": "Contains", '
             '"settings": [1]}', "unknown-setting": '{"class": "Contains", "settings": {"values": ["q"], "bogus": 1}}'}
    for name, spec in specs.items():
        ctx = EvalContext(input="q", output="q", run_id=f"run-{name}", agent_id="a")
        outbox.put(Job(id=f"job-{name}", evaluator=name, context=context_to_dict(ctx), spec=spec))
    outbox.release()  # its process is gone
    outbox.close()
    done = run_cli("resume", "--store", db, "--timeout", "60")
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    for name in specs.keys() - {"has-q"}:
        assert f"evaluator {name!r} has pending jobs but" in done.stderr
    assert [(r.evaluator, r.status) for r in SQLiteStore(str(db)).query_sync(limit=None)] == [("has-q", "passed")]
    assert pending(tmp_path / "s.outbox.db") == 4


def test_report_counts_pending_jobs_whose_names_are_not_text_or_not_utf8(tmp_path):
    """An `eval_jobs` row whose evaluator is a blob, or text that is not UTF-8: `judgehooks report`
    failed on the first ("cannot open store ...: TypeError", comparing bytes with str) and said
    nothing was pending on the second. Both are counted, under names shown with U+FFFD."""
    import asyncio
    import json
    import sqlite3

    from conftest import rec

    from judgehooks._grading.outbox import Job, Outbox

    db = tmp_path / "s.db"
    asyncio.run(SQLiteStore(str(db)).write([rec(1)]))
    outbox = Outbox(tmp_path / "s.outbox.db")
    outbox.put(Job(id="good", evaluator="e", context={}))
    outbox.close()
    with sqlite3.connect(tmp_path / "s.outbox.db") as conn:
        conn.execute("INSERT INTO eval_jobs VALUES ('blob', X'61ff', NULL, '{}', 1.0, 1.0, 'x')")
        conn.execute("INSERT INTO eval_jobs VALUES ('text', CAST(X'62ff' AS TEXT), NULL, '{}', 1.0, 1.0, 'x')")
    done = run_cli("report", "--store", db, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["pending_jobs"]["by_evaluator"] == {"a\ufffd": 1, "b\ufffd": 1, "e": 1}


def test_report_shows_dead_letters_whose_fields_are_blobs_or_not_utf8(tmp_path):
    """A row of `eval_dead_letters` (in the outbox file) whose store name is a blob: `judgehooks report
    --json` raised TypeError with a traceback (bytes as a JSON key); whose store name is text that is
    not UTF-8: the report said there were no dead letters. Both are shown, with U+FFFD."""
    import asyncio
    import json
    import sqlite3

    from conftest import rec

    from judgehooks.stores._deadletter import SCHEMA

    db = tmp_path / "s.db"
    asyncio.run(SQLiteStore(str(db)).write([rec(1)]))
    with sqlite3.connect(tmp_path / "s.outbox.db") as conn:
        for statement in SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT INTO eval_dead_letters (id, store, record, error, tries, dead_at) "
                     "VALUES ('a', X'61ff', '{}', X'00', 5, 1.0)")
        conn.execute("INSERT INTO eval_dead_letters (id, store, record, error, tries, dead_at) "
                     "VALUES ('b', CAST(X'62ff' AS TEXT), '{}', 'refused', 5, 1.0)")
    done = run_cli("report", "--store", db, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["dead_letters"]["by_store"] == {"a\ufffd": 1, "b\ufffd": 1}


def test_resume_takes_no_judge_settings_from_an_outbox_file_another_user_owns(server, tmp_path):
    """Another user who creates the outbox file first (in a folder both may write) can write its
    specs: `resume` rebuilt the judge from them, so a stored `api_base` chose where this user's
    provider key (from the environment) was sent. Like a journal file of another user, such a file's
    specs are not rebuilt: resume names the file's owner and leaves its jobs pending; the same file,
    this user's own, is graded as before."""
    import json

    from judgehooks import AgentAsJudgeEval
    from judgehooks._base.context import EvalContext, context_to_dict
    from judgehooks._grading.outbox import Job, Outbox

    db, path = tmp_path / "s.db", tmp_path / "s.outbox.db"
    spec = AgentAsJudgeEval(criteria="Echoes.", model="openai/judge", api_base=server.base_url, name="elsewhere").spec()
    outbox = Outbox(path)
    ctx = EvalContext(input="q", output="q", run_id="run-1", agent_id="a")
    outbox.put(Job(id="job-1", evaluator="elsewhere", context=context_to_dict(ctx), spec=json.dumps(spec)))
    outbox.release()
    outbox.close()
    os.chown(path, 4242, 4242)  # another user's file (the test runs as root)
    key = {"OPENAI_API_KEY": "sk-this-users-key"}
    done = run_cli("resume", "--store", db, "--timeout", "30", env=key)
    assert done.returncode == 1 and "owned by another user (uid 4242)" in done.stderr, done.stderr[-2000:]

    def sent_the_key() -> bool:
        return any("sk-this-users-key" in h.get("authorization", "") for h in server.settings.judge_headers)

    assert not sent_the_key() and pending(path) == 1
    assert not db.exists() or SQLiteStore(str(db)).query_sync(limit=None) == []
    os.chown(path, os.getuid(), os.getgid())
    done = run_cli("resume", "--store", db, "--timeout", "30", env=key)
    assert done.returncode == 0, done.stderr[-2000:]
    [record] = SQLiteStore(str(db)).query_sync(limit=None)  # graded by the judge its spec names
    assert (record.evaluator, record.run_id, record.status) == ("elsewhere", "run-1", "passed")
    assert pending(path) == 0
