"""SessionJudge under the byte budget (`max_queue_bytes`): a turn past it is its run's `skipped`
record, a session whose turns reach it is graded at once, and a claim of due sessions reads about
that many bytes at most. Real agno agents, real litellm over HTTP to the loopback server, real SQLite.

A turn of an agent run on `"x" * 2000` is about 4,470 bytes as the book stores it (the input, the
stub's echo of it, the run's ids): two of them stay under a budget of 12,000 bytes, three pass it.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time

import pytest
from conftest import wait_for
from structlog.testing import capture_logs

import judgehooks
from judgehooks import EvalRecord, SessionJudge
from judgehooks._grading.sessionbook import SessionBook
from judgehooks._runtime import runtime

BUDGET = 12_000
TURN = "x" * 2000  # a turn of about 4,470 bytes


@pytest.fixture
def make_session_judge(server, store, tmp_path):
    def make(**kwargs) -> SessionJudge:
        settings = dict(criteria="Helps the user over the whole conversation.", model="openai/judge",
                        api_base=server.base_url, api_key="test-key", store=store, retry_backoff=0.01, timeout=20,
                        outbox=str(tmp_path / "outbox.db"), idle_after=3600, max_queue_bytes=BUDGET)
        settings.update(kwargs)
        return SessionJudge(**settings)

    return make


def session_records(store, session_id: str | None = None) -> list[EvalRecord]:
    return [r for r in store.records if r.scope == "session" and r.status != "skipped"
            and (session_id is None or r.session_id == session_id)]


def turn(text: str) -> dict:
    """A turn as the hook stores it, of about `len(text)` bytes."""
    return {"run": {"input": text, "output": "o", "run_id": "r"}, "members": [], "at": 1.0}


# ---- a turn past the budget ------------------------------------------------------------------------

def test_a_turn_past_the_byte_budget_is_its_runs_skipped_record_and_the_other_turns_are_graded(
        make_session_judge, make_agent, store, tmp_path):
    """A turn was stored and read whatever its size. Now one past `max_queue_bytes` is never
    recorded: like a job shed past the byte budget, its run gets one `skipped` record naming its
    size and the budget, given to `on_drop` and counted; the session's other turns are one window."""
    dropped: list[EvalRecord] = []
    judge = make_session_judge(on_drop=dropped.append)
    agent = make_agent(judge)
    first = agent.run("first", session_id="s-big")
    with capture_logs() as logs:
        big = agent.run("x" * 10_000, session_id="s-big")  # about 20,470 bytes
    third = agent.run("third", session_id="s-big")
    assert judgehooks.drain(30)
    [record] = [r for r in store.records if r.status == "skipped"]
    assert (record.run_id, record.session_id, record.scope, record.run_ids) == (big.run_id, "s-big", "session",
                                                                                [big.run_id])
    found = re.fullmatch(r"session turn not recorded: its (\d+) bytes pass the byte budget of 12000 bytes "
                         r"\(max_queue_bytes\)", record.reason)
    assert found and int(found[1]) > 20_000, record.reason
    [said] = [e for e in logs if e["event"] == "session_turn_lost"]
    assert (said["log_level"], said["run_id"], said["size"], said["max_queue_bytes"]) == (
        "warning", big.run_id, int(found[1]), BUDGET)
    assert dropped == [record] and judge.stats()["turns_lost"] == 1 and judge.stats()["turns"] == 2
    with sqlite3.connect(tmp_path / "outbox.db") as conn:  # never written, nor counted in the session's bytes
        assert conn.execute("SELECT COUNT(*) FROM session_turns WHERE run_id = ?", [big.run_id]).fetchone() == (0,)
        assert conn.execute("SELECT bytes FROM session_state").fetchone() == conn.execute(
            "SELECT SUM(LENGTH(CAST(turn AS BLOB))) FROM session_turns").fetchone()
    [graded] = judgehooks.end_session("s-big", judge)
    assert graded.status == "passed" and graded.run_ids == [first.run_id, third.run_id]


# ---- a window closed by size ------------------------------------------------------------------------

def test_a_session_whose_turns_reach_the_budget_is_graded_at_once_and_a_later_turn_starts_the_next_window(
        make_session_judge, make_agent, store):
    """With turns that keep coming, a session never went quiet: its one window grew without bound,
    all of it read at once when it was claimed. Now the turn that brings it to `max_queue_bytes`
    makes it due at once, and the hook wakes the clock (which would sleep for an hour here)."""
    judge = make_session_judge()
    grader, book = judge._shell.grader, judge._shell.book
    grader.poll = 3600.0  # only a wake from the hook makes the clock look before the hour is up
    runtime.loop().call_soon_threadsafe(grader.clock.wake)
    wait_for(lambda: (grader._wake_at or 0) > time.time() + 1000)
    agent = make_agent(judge)
    window = [agent.run(TURN, session_id="s-long") for _ in range(2)]
    assert book.next_due(judge.evaluator_name) > time.time() + 3000  # under the budget: due after idle_after
    window.append(agent.run(TURN, session_id="s-long"))  # past it: due now
    wait_for(lambda: session_records(store), timeout=30)
    [record] = session_records(store)
    assert record.status == "passed" and record.run_ids == [r.run_id for r in window]
    later = agent.run("one more", session_id="s-long")
    wait_for(lambda: judge.stats()["in_flight"] == 0, timeout=30)
    assert book.next_due(judge.evaluator_name) > time.time() + 3000  # the next window counts from zero
    [two] = judgehooks.end_session("s-long", judge)
    assert two.run_ids == [later.run_id] and two.id != record.id


def test_a_window_closes_by_size_on_the_turns_it_holds_not_those_graded_meanwhile(tmp_path):
    """The count is kept with the turns, in their transaction: a turn that comes while the session is
    being graded counts toward the next window; once the window is finished, the session is due at
    once only if what is left reaches the budget."""
    book = SessionBook(tmp_path / "o.db", max_bytes=1000)
    later = time.time() + 3600
    book.add_turn("ev", "s", "r1", turn("a" * 300), due_at=later)  # about 360 bytes each
    book.add_turn("ev", "s", "r2", turn("b" * 300), due_at=later)
    assert book.claim_due("ev") == []  # under the budget: due after idle_after
    due = book.add_turn("ev", "s", "r3", turn("c" * 300), due_at=later)  # past 1,000 bytes: due now
    [claim] = book.claim_due("ev")
    assert [t["run"]["input"][0] for t in claim.turns] == ["a", "b", "c"] and claim.size > 1000
    assert due <= time.time()  # what the hook arms the clock with
    assert book.add_turn("ev", "s", "r4", turn("d" * 300), due_at=later) == later  # the window being graded
    assert book.add_turn("ev", "s", "r1", turn("a"), due_at=0) is None  # a run recorded already: nothing written
    book.finish(claim)
    assert book.next_due("ev") == later and book.claim_due("ev") == []
    book.add_turn("ev", "s", "r5", turn("e" * 300), due_at=later)
    assert book.add_turn("ev", "s", "r6", turn("f" * 300), due_at=later) <= time.time()
    [claim] = book.claim_due("ev")
    assert [t["run"]["input"][0] for t in claim.turns] == ["d", "e", "f"]


# ---- a claim within the budget ------------------------------------------------------------------------

def test_a_claim_stops_taking_sessions_once_the_turns_it_read_reach_the_budget(tmp_path):
    """A claim took up to 32 due sessions with every turn of each, whatever they held. Now it takes
    the first whatever its size (as `Outbox.claim` takes its first job), then no session whose turns
    would pass the budget; the rest stay due and are taken in the next rounds, each once."""
    book = SessionBook(tmp_path / "o.db", max_bytes=1000)
    book.add_turn("ev", "s0", "s0-r1", turn("z" * 700), due_at=0)  # the oldest: claimed first
    book.add_turn("ev", "s0", "s0-r2", turn("z" * 700), due_at=0)  # about 1,520 bytes: past the budget alone
    for i, sid in enumerate(("s1", "s2", "s3", "s4", "s5"), 1):
        book.add_turn("ev", sid, f"{sid}-r", turn("y" * 350), due_at=i)  # about 410 bytes each
    rounds = []
    while claims := book.claim_due("ev", limit=32):
        rounds.append([c.session_id for c in claims])
        assert len(claims) == 1 or sum(c.size for c in claims) <= 1000
        for claim in claims:
            book.finish(claim)
    assert rounds[0] == ["s0"] and [len(r) for r in rounds[1:]] == [2, 2, 1]
    assert sorted(sid for r in rounds for sid in r) == ["s0", "s1", "s2", "s3", "s4", "s5"]
    assert book.turns_waiting() == {}


def test_due_sessions_past_the_budget_together_are_graded_over_several_claims(make_session_judge, make_agent, store):
    judge = make_session_judge(idle_after=300)
    book = judge._shell.book
    taken: list[list[str]] = []
    claim_due = book.claim_due

    def spy(*args, **kwargs):
        claims = claim_due(*args, **kwargs)
        if claims:
            taken.append([c.session_id for c in claims])
        return claims

    book.claim_due = spy
    agent = make_agent(judge)
    runs = {sid: [agent.run(TURN, session_id=sid).run_id for _ in range(2)] for sid in ("s1", "s2", "s3", "s4")}
    assert book.file.run("UPDATE session_state SET due_at = 0") == 4  # each about 8,940 bytes, all due at once
    assert judgehooks.drain(60)
    assert {r.session_id: r.run_ids for r in session_records(store)} == runs
    assert all(len(t) == 1 for t in taken) and sorted(sum(taken, [])) == ["s1", "s2", "s3", "s4"]  # one a claim


# ---- a book file made before the count ------------------------------------------------------------------

def test_a_book_file_made_before_window_sizes_gets_the_column_and_its_sessions_close_by_size(
        make_session_judge, make_agent, store, tmp_path):
    """A book an earlier version left (no `bytes` column, nor turn positions) gets them when opened;
    its open session counts from its next turn and is graded with its old turn as one window."""
    with sqlite3.connect(tmp_path / "outbox.db") as old:
        old.execute("CREATE TABLE session_state (evaluator TEXT NOT NULL, session_id TEXT NOT NULL, spec TEXT, "
                    "sample_rate REAL NOT NULL DEFAULT 1.0, next_seq INTEGER NOT NULL DEFAULT 1, due_at REAL, "
                    "lease_until REAL, lease_owner TEXT, PRIMARY KEY (evaluator, session_id))")
        old.execute("CREATE TABLE session_turns (evaluator TEXT NOT NULL, session_id TEXT NOT NULL, seq INTEGER NOT "
                    "NULL, run_id TEXT NOT NULL, turn TEXT NOT NULL, created_at REAL NOT NULL, PRIMARY KEY "
                    "(evaluator, session_id, seq))")
        old.execute("INSERT INTO session_state VALUES ('old-book', 's-old', NULL, 1.0, 2, 1e12, NULL, NULL)")
        old.execute("INSERT INTO session_turns VALUES ('old-book', 's-old', 1, 'r-old', ?, 1.0)", [json.dumps(
            {"run": {"input": "before", "output": "ECHO: before", "run_id": "r-old", "session_id": "s-old"},
             "members": [], "at": 1.0})])
    judge = make_session_judge(name="old-book")
    agent = make_agent(judge)
    runs = [agent.run(TURN, session_id="s-old").run_id for _ in range(3)]  # the third reaches the budget
    assert judgehooks.drain(30)  # grades what is due: only a window closed by size is, an hour before idle_after
    [record] = session_records(store)
    assert record.status == "passed" and record.run_ids == ["r-old", *runs]
    with sqlite3.connect(tmp_path / "outbox.db") as conn:
        assert "bytes" in {row[1] for row in conn.execute("PRAGMA table_info(session_state)")}
