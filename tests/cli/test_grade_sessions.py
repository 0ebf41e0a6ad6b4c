"""`judgehooks grade-sessions`: conversations that agno stored (real SqliteDb and PostgresDb, written
by real agno agents and teams) graded once each, through real litellm to the loopback server."""

from __future__ import annotations

import pytest
from agno.agent import Agent
from agno.team import Team
from conftest import model

from judgehooks import SQLiteStore
from judgehooks._cli import main

CRITERIA = "Helps the user over the whole conversation."


def grade(capsys, server, agno_url: str, store: str, *extra: str) -> tuple[int, str]:
    code = main(["grade-sessions", "--agno-db", agno_url, "--store", f"sqlite:///{store}", "--criteria", CRITERIA,
                 "--model", "openai/judge", "--api-base", server.base_url, "--api-key", "test-key", *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def session_records(store: str) -> dict[str, list]:
    found: dict[str, list] = {}
    for record in SQLiteStore(store).query_sync(limit=None):
        assert record.scope == "session"
        found.setdefault(record.session_id, []).append(record)
    return found


def converse(agent, session_id: str, turns: int) -> list[str]:
    return [agent.run(f"{session_id} turn {i}", session_id=session_id).run_id for i in range(turns)]


def _graded_once_and_again(capsys, server, tmp_path, db, url):
    agent = Agent(model=model(server), db=db, id="stored-agent", telemetry=False)
    other = Agent(model=model(server), db=db, id="other-agent", telemetry=False)
    runs = {sid: converse(agent, sid, n) for sid, n in (("a", 3), ("b", 1))}
    converse(other, "c", 2)
    store = str(tmp_path / "evals.db")

    code, out = grade(capsys, server, url, store, "--agent-id", "stored-agent")
    assert code == 0 and "graded 2 session(s) (2 passed), skipped 0 already graded" in out
    graded = session_records(store)
    assert sorted(graded) == ["a", "b"]  # only the agent asked for
    assert [r.run_ids for r in graded["a"]] == [runs["a"]] and graded["a"][0].agent_id == "stored-agent"

    code, out = grade(capsys, server, url, store, "--agent-id", "stored-agent")
    assert code == 0 and "graded 0 session(s), skipped 2 already graded" in out  # idempotent
    assert sum(len(v) for v in session_records(store).values()) == 2

    more = converse(agent, "b", 1)  # the conversation went on: graded again, whole
    code, out = grade(capsys, server, url, store, "--agent-id", "stored-agent")
    assert "graded 1 session(s) (1 passed), skipped 1 already graded" in out
    assert sorted(len(r.run_ids) for r in session_records(store)["b"]) == [1, 2]
    assert max(session_records(store)["b"], key=lambda r: len(r.run_ids)).run_ids == runs["b"] + more


def test_grade_sessions_over_an_agno_sqlite_db(capsys, server, tmp_path):
    from agno.db.sqlite import SqliteDb

    path = tmp_path / "agno.db"
    _graded_once_and_again(capsys, server, tmp_path, SqliteDb(db_file=str(path)), f"sqlite:///{path}")


def test_grade_sessions_over_an_agno_postgres_db(capsys, server, tmp_path, postgres_dsn):
    from agno.db.postgres import PostgresDb

    db = PostgresDb(db_url="postgresql+psycopg://" + postgres_dsn.partition("://")[2])
    _graded_once_and_again(capsys, server, tmp_path, db, postgres_dsn)


def test_grade_sessions_skips_only_sessions_graded_by_the_same_evaluator_version(capsys, server, tmp_path):
    """Under one --name, a changed threshold or changed criteria is another evaluator version: the
    sessions are graded again; the same settings again skip them."""
    from agno.db.sqlite import SqliteDb

    path = tmp_path / "agno.db"
    converse(Agent(model=model(server), db=SqliteDb(db_file=str(path)), id="v-agent", telemetry=False), "v", 2)
    url, store = f"sqlite:///{path}", str(tmp_path / "evals.db")
    numeric = ("--name", "nightly", "--scoring-strategy", "numeric")
    steps = [((*numeric, "--threshold", "7"), "graded 1"), ((*numeric, "--threshold", "7"), "graded 0"),
             ((*numeric, "--threshold", "9"), "graded 1"), ((*numeric, "--threshold", "9"), "graded 0"),
             ((*numeric, "--threshold", "9", "--criteria", "Stays polite."), "graded 1"),
             ((*numeric, "--threshold", "9", "--criteria", "Stays polite."), "graded 0")]
    for argv, said in steps:
        code, out = grade(capsys, server, url, store, *argv)
        assert code == 0 and said in out, (argv, out)
    records = session_records(store)["v"]
    assert len(records) == 3 and len({r.evaluator_version for r in records}) == 3
    assert {r.evaluator for r in records} == {"nightly"} and sorted(r.threshold for r in records) == [7, 9, 9]
    [polite] = [r for r in records if r.criteria == "Stays polite."]
    assert "already graded by 'nightly' version " + polite.evaluator_version in out


def test_another_judge_model_is_another_evaluator_version_and_grades_again(capsys, server, tmp_path):
    """`--model <another>` asks another judge: its verdicts are not the first one's, so the
    sessions are graded again (the judge model is in the SessionJudge's version), once."""
    from agno.db.sqlite import SqliteDb

    path = tmp_path / "agno.db"
    converse(Agent(model=model(server), db=SqliteDb(db_file=str(path)), id="m-agent", telemetry=False), "m", 2)
    url, store = f"sqlite:///{path}", str(tmp_path / "evals.db")
    assert "graded 1" in grade(capsys, server, url, store, "--name", "nightly")[1]
    for said in ("graded 1", "graded 0"):
        code, out = grade(capsys, server, url, store, "--name", "nightly", "--model", "openai/another-judge")
        assert code == 0 and said in out, out
    records = session_records(store)["m"]
    assert sorted(r.judge_model for r in records) == ["another-judge", "judge"]
    assert len({r.evaluator_version for r in records}) == 2 and len({r.id for r in records}) == 2


def test_records_from_before_versions_count_as_the_same_evaluator_when_their_criteria_match(capsys, server,
                                                                                          tmp_path):
    import sqlite3

    from agno.db.sqlite import SqliteDb

    path = tmp_path / "agno.db"
    converse(Agent(model=model(server), db=SqliteDb(db_file=str(path)), id="o-agent", telemetry=False), "o", 1)
    url, store = f"sqlite:///{path}", str(tmp_path / "evals.db")
    assert "graded 1" in grade(capsys, server, url, store, "--name", "old")[1]
    with sqlite3.connect(store) as conn:  # as a version without evaluator versions stored it
        conn.execute("UPDATE eval_records SET evaluator_version = NULL")
    assert "graded 0" in grade(capsys, server, url, store, "--name", "old")[1]
    assert "graded 1" in grade(capsys, server, url, store, "--name", "old", "--criteria", "Other.")[1]


def test_grade_sessions_reads_team_sessions_with_member_runs(capsys, server, tmp_path):
    from agno.db.sqlite import SqliteDb

    path = tmp_path / "agno.db"
    member = Agent(model=model(server), name="member", telemetry=False)
    team = Team(members=[member], model=model(server), db=SqliteDb(db_file=str(path)), id="team-s", telemetry=False,
                store_member_responses=True)
    runs = [team.run(f"team {i} [[tool=delegate_task_to_member]] [[arg_member_id=member]]", session_id="t").run_id
            for i in range(2)]
    store = str(tmp_path / "evals.db")
    code, out = grade(capsys, server, f"sqlite:///{path}", store, "--team-id", "team-s")
    assert code == 0 and "graded 1 session(s)" in out
    [record] = session_records(store)["t"]
    assert record.run_ids == runs and record.team_id == "team-s"
    prompt = server.settings.judge_prompts[-1]
    assert prompt.count('"name": "member"') == 2


def test_grade_sessions_names_a_bad_agno_db(capsys, server, tmp_path):
    code, out = grade(capsys, server, "mysql://nowhere/db", str(tmp_path / "e.db"))
    assert code == 1
    assert "--agno-db 'mysql://nowhere/db': an agno db URL is sqlite:///path.db or postgresql://" in out


@pytest.mark.parametrize("missing", ["--agno-db", "--criteria"])
def test_grade_sessions_requires_the_db_and_the_criteria(missing, capsys):
    argv = ["grade-sessions", "--agno-db", "sqlite:///x.db", "--criteria", "c"]
    i = argv.index(missing)
    with pytest.raises(SystemExit):
        main(argv[:i] + argv[i + 2:])


def test_an_agent_id_that_matches_nothing_fails_and_lists_the_agents_there(capsys, server, tmp_path):
    """A typo in --agent-id graded nothing and said "graded 0 session(s)", exit 0: it now exits 1
    naming the agents (or teams) the db holds sessions of, and the flag to use for a team's id."""
    from agno.db.sqlite import SqliteDb

    path = tmp_path / "agno.db"
    db = SqliteDb(db_file=str(path))
    converse(Agent(model=model(server), db=db, id="support-bot", telemetry=False), "s1", 1)
    converse(Agent(model=model(server), db=db, id="sales-bot", telemetry=False), "s2", 1)
    converse(Agent(model=model(server), db=db, id="sales-bot", telemetry=False), "s3", 1)
    Team(members=[Agent(model=model(server), telemetry=False)], model=model(server), db=db, id="desk",
         telemetry=False).run("hi", session_id="t1")
    store = str(tmp_path / "evals.db")
    url = f"sqlite:///{path}"

    code, out = grade(capsys, server, url, store, "--agent-id", "suport-bot")
    assert code == 1 and "graded" not in out
    assert "--agent-id 'suport-bot' matches no agent session" in out
    assert "'sales-bot' (2 session(s)), 'support-bot' (1 session(s))" in out

    code, out = grade(capsys, server, url, store, "--agent-id", "desk")
    assert code == 1 and "it is the id of a team: pass --team-id desk" in out
    code, out = grade(capsys, server, url, store, "--team-id", "nobody")
    assert code == 1 and "the teams there are: 'desk' (1 session(s))" in out

    code, out = grade(capsys, server, url, store, "--agent-id", "support-bot", "--since", "2099-01-01T00:00:00")
    assert code == 0 and "graded 0 session(s)" in out  # a known agent whose sessions --since leaves out
    assert session_records(store) == {}
