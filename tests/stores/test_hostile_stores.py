"""Hostile records and hostile infrastructure at the store: odd metadata, records a store refuses for
good, file modes, a hanging judge, large answers, fork. Real agno agents, real litellm over HTTP to
the suite's loopback server, real SQLite files."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time

import pytest
from _outbox import connect, pending
from conftest import rec, wait_for

import judgehooks
from judgehooks import JsonlStore, MemoryStore, SQLiteStore


class Opaque:
    """An object JSON cannot hold, as an application may put in a run's metadata."""

    def __str__(self) -> str:
        return "opaque-object"


def _stores(tmp_path):
    return {"jsonl": JsonlStore(tmp_path / "evals.jsonl"), "sqlite": SQLiteStore(tmp_path / "evals.db"),
            "memory": MemoryStore()}


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "memory"])
def test_an_object_in_the_metadata_is_stored_as_its_text_inline(kind, make_judge, make_agent, tmp_path):
    store = _stores(tmp_path)[kind]
    agent = make_agent(make_judge(store=store))
    agent.run("question", metadata={"obj": Opaque(), "tags": {"a"}, "n": 1})
    [record] = judgehooks._runtime.runtime.call(store.query)
    assert record.status == "passed"
    assert record.metadata["obj"] == "opaque-object" and record.metadata["tags"] == ["a"]
    assert record.metadata["n"] == 1


@pytest.mark.parametrize("background", [False, True])
@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "memory"])
def test_bytes_that_are_not_utf8_in_the_metadata_are_stored_as_their_text(kind, background, make_judge, make_agent,
                                                                        tmp_path):
    store = _stores(tmp_path)[kind]
    extra = {"run_in_background": True, "outbox": str(tmp_path / "o.db")} if background else {}
    make_agent(make_judge(store=store, **extra)).run("question", metadata={"raw": b"\xff\xfe", "ok": b"ok"})
    assert judgehooks.drain(30)
    [record] = judgehooks._runtime.runtime.call(store.query)
    assert record.status == "passed"
    assert (record.metadata["raw"], record.metadata["ok"]) == ("b'\\xff\\xfe'", "b'ok'")


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_an_object_in_one_runs_metadata_sinks_no_record_of_its_background_batch(kind, make_judge, make_agent,
                                                                                 tmp_path):
    store = _stores(tmp_path)[kind]
    judge = make_judge(store=store, run_in_background=True, judge_process=False, outbox=str(tmp_path / "outbox.db"))
    agent = make_agent(judge)
    for i in range(9):
        agent.run(f"question {i}", metadata={"obj": Opaque()} if i == 4 else {"i": i})
    assert judgehooks.drain(60)
    records = judgehooks._runtime.runtime.call(store.query)
    assert sorted(r.input for r in records) == [f"question {i}" for i in range(9)]
    assert {r.status for r in records} == {"passed"}, [r.error_message for r in records]
    assert [r.metadata["obj"] for r in records if "obj" in r.metadata] == ["opaque-object"]
    assert judge.stats()["store_failures"] == 0


def test_a_record_the_store_refuses_becomes_an_error_record_and_its_batch_is_stored(make_judge, make_agent,
                                                                                     tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")  # SQLite INTEGER holds at most 2**63 - 1
    judge = make_judge(store=store, run_in_background=True, judge_process=False, outbox=str(tmp_path / "outbox.db"))
    agent = make_agent(judge)
    for i in range(8):
        agent.run(f"question {i}" + (f" [[run_tokens={2**64}]]" if i == 3 else ""))
    assert judgehooks.drain(60)
    records = {r.input: r for r in store.query_sync(limit=None)}
    assert len(records) == 8
    bad = records[f"question 3 [[run_tokens={2**64}]]"]
    assert (bad.status, bad.error_type, bad.run_input_tokens) == ("error", "StoreError", None)
    assert "the store refused this record (OverflowError" in bad.error_message and "passed" in bad.error_message
    assert all(r.status == "passed" for key, r in records.items() if r is not bad)
    assert pending(tmp_path / "outbox.db") == 0  # nothing left to regrade


@pytest.mark.anyio
async def test_a_record_the_store_refuses_inline_is_stored_as_an_error_record(tmp_path):
    from judgehooks.stores._base import write_salvaging

    store = SQLiteStore(tmp_path / "evals.db")
    stored, error = await write_salvaging(store, [rec(1, prompt_tokens=2**64)])
    assert error is None and [(r.id, r.status, r.error_type) for r in stored] == [("id-1", "error", "StoreError")]
    assert [r.status for r in store.query_sync()] == ["error"]


@pytest.mark.anyio
async def test_a_store_that_is_down_is_not_mistaken_for_a_picky_one(tmp_path):
    from judgehooks.stores._base import write_salvaging

    class Down(MemoryStore):
        async def write(self, records):
            raise ConnectionError("store is down")

    stored, error = await write_salvaging(Down(), [rec(1), rec(2)])
    assert stored == [] and error is not None and [r.id for r in error.records] == ["id-1", "id-2"]


def test_results_json_holds_an_object_from_the_metadata_as_text(make_judge, tmp_path):
    path = tmp_path / "results" / "{name}.json"
    judge = make_judge(store=MemoryStore(), file_path_to_save_results=str(path), name="saved")
    judge.run(cases=[{"input": "q", "output": "ECHO: q", "metadata": {"obj": Opaque()}}])
    saved = json.loads((tmp_path / "results" / "saved.json").read_text())
    assert saved["results"][0]["metadata"]["obj"] == "opaque-object"


# ---- PostgreSQL: BIGINT counters, and a record it refuses for good never blocks the spill ---------

OLD_SPILL_SCHEMA = """CREATE TABLE eval_spill (seq INTEGER PRIMARY KEY AUTOINCREMENT, store TEXT NOT NULL,
    id TEXT NOT NULL, record TEXT NOT NULL, spilled_at REAL NOT NULL)"""


def test_postgres_counters_are_bigint_and_a_table_from_an_older_version_is_widened(postgres_dsn):
    import psycopg

    from judgehooks import PostgresStore
    from judgehooks._base.record import FIELDS
    from judgehooks.stores._postgres import _TYPES

    old = {"prompt_tokens", "completion_tokens", "attempts"}
    columns = ", ".join(f"{f} {'INTEGER' if f in old else _TYPES.get(f, 'TEXT')}" for f in FIELDS)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # the INTEGER counters of earlier versions
        conn.execute(f"CREATE TABLE eval_records ({columns}, PRIMARY KEY (id))")
    store = PostgresStore(postgres_dsn)
    call = judgehooks._runtime.runtime.call
    call(store.write, [rec(1, prompt_tokens=2**40, completion_tokens=2**33, attempts=2**31)])
    [back] = call(store.query)
    assert (back.prompt_tokens, back.completion_tokens, back.attempts) == (2**40, 2**33, 2**31)
    with psycopg.connect(postgres_dsn) as conn:
        kinds = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                                  "WHERE table_name = 'eval_records' AND column_name = ANY(%s)", (list(old),)))
    assert kinds == dict.fromkeys(old, "bigint")
    call(store.aclose)


def test_a_record_postgres_refuses_becomes_a_dead_letter_and_the_spill_flows_on(postgres_dsn, tmp_path,
                                                                                 monkeypatch, capsys):
    from judgehooks import PostgresStore
    from judgehooks._cli import main
    from judgehooks.stores._spill import SpillingStore, store_key

    spill_path = tmp_path / "outbox.db"
    store = PostgresStore(postgres_dsn)
    poison = rec(0, prompt_tokens=2**64)  # past BIGINT too: PostgreSQL refuses it, every time
    conn = sqlite3.connect(spill_path)  # left by an earlier process, in an earlier version's spill schema
    conn.execute(OLD_SPILL_SCHEMA)
    conn.executemany("INSERT INTO eval_spill (store, id, record, spilled_at) VALUES (?, ?, ?, 0)",
                     [(store_key(store), r.id, r.model_dump_json()) for r in (poison, rec(1), rec(2))])
    conn.commit()
    conn.close()
    spilling = SpillingStore(store, spill_path, retry_interval=0.01, max_interval=0.05, max_tries=3)
    call = judgehooks._runtime.runtime.call
    call(spilling.write, [rec(3)])
    assert spilling.wait(60)
    by_id = {r.id: r for r in call(store.query)}
    assert sorted(by_id) == ["id-0", "id-1", "id-2", "id-3"]
    assert all(by_id[f"id-{i}"].status == "passed" for i in (1, 2, 3))
    stand_in = by_id["id-0"]  # the evaluation still has its one record in the store: an error saying why
    assert (stand_in.status, stand_in.error_type, stand_in.prompt_tokens) == ("error", "StoreError", None)
    assert spilling.stats()["dead_letters"] == 1 and spilling.stats()["spill_pending"] == 0
    [(record, error, tries)] = sqlite3.connect(spill_path).execute(
        "SELECT record, error, tries FROM eval_dead_letters").fetchall()
    assert json.loads(record)["prompt_tokens"] == 2**64 and tries == 3 and "out of range" in error
    call(spilling.aclose)
    assert main(["report", "--store", postgres_dsn, "--since", "all", "--outbox", str(spill_path)]) == 0
    out = capsys.readouterr().out
    assert "dead letters: 1 record(s) the store refused" in out and "id-0" in out
    assert main(["report", "--store", postgres_dsn, "--since", "all", "--outbox", str(spill_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dead_letters"]["count"] == 1


# ---- file modes: what judgehooks creates holds users' inputs and answers -------------------------

def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)  # the usual umask, under which files default to 0644
    yield
    os.umask(old)


def test_every_file_judgehooks_creates_is_private(umask_022, make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    agent = make_agent(make_judge(store=store, run_in_background=True, judge_process=False))  # outbox: evals.outbox.db
    agent.run("question")
    assert judgehooks.drain(30)
    call = judgehooks._runtime.runtime.call
    call(JsonlStore(tmp_path / "evals.jsonl").write, [rec(1)])
    make_judge(store=MemoryStore(), file_path_to_save_results=str(tmp_path / "{name}.json"), name="saved").run(
        input="q", output="ECHO: q")
    files = ["evals.db", "evals.db-wal", "evals.db-shm", "evals.outbox.db", "evals.outbox.db-wal",
             "evals.outbox.db-shm", "evals.jsonl", "saved.json"]
    assert {name: oct(_mode(tmp_path / name)) for name in files} == dict.fromkeys(files, "0o600")


def test_an_explicit_mode_is_respected_and_an_existing_file_keeps_its_own(umask_022, tmp_path):
    call = judgehooks._runtime.runtime.call
    shared = SQLiteStore(tmp_path / "shared.db", mode=0o640)
    call(shared.write, [rec(1)])
    assert [oct(_mode(tmp_path / f"shared.db{end}")) for end in ("", "-wal", "-shm")] == ["0o640"] * 3
    call(JsonlStore(tmp_path / "shared.jsonl", mode=0o640).write, [rec(1)])
    assert _mode(tmp_path / "shared.jsonl") == 0o640
    (tmp_path / "mine.db").touch(0o644)
    (tmp_path / "mine.jsonl").touch(0o644)
    call(SQLiteStore(tmp_path / "mine.db").write, [rec(1)])
    call(JsonlStore(tmp_path / "mine.jsonl").write, [rec(1)])
    assert (_mode(tmp_path / "mine.db"), _mode(tmp_path / "mine.jsonl")) == (0o644, 0o644)
    with pytest.raises(ValueError, match="mode must be file permission bits"):
        SQLiteStore(tmp_path / "x.db", mode="600")


# ---- a hanging judge, large answers: the hook never waits, memory and the outbox stay bounded -----

def test_behind_a_hanging_judge_a_full_queue_sheds_at_once_by_default(make_judge, make_agent, store, server):
    server.configure(judge_delay_ms=1500)  # slower than any run: the queue fills behind it
    judge = make_judge(run_in_background=True, judge_process=False, max_queue=2, max_concurrency=1)
    assert judge.hook_settings.overload == "drop_newest"
    agent = make_agent(judge)
    run_ids = [agent.run(f"q{i}").run_id for i in range(7)]
    assert judgehooks.drain(60)
    by_run = {r.run_id: r for r in store.records}
    assert sorted(by_run) == sorted(run_ids)
    skipped = [r for r in store.records if r.status == "skipped"]
    assert skipped and all(r.reason == "queue full: newest dropped (drop_newest)" for r in skipped)
    assert by_run[run_ids[0]].status == "passed"


def test_large_answers_past_the_byte_budget_are_shed_with_a_skipped_record(make_judge, make_agent, store, server,
                                                                            tmp_path):
    server.configure(judge_delay_ms=1000)
    judge = make_judge(run_in_background=True, judge_process=False, max_queue_bytes=60_000,
                       outbox=str(tmp_path / "outbox.db"))
    agent = make_agent(judge)
    run_ids = [agent.run(f"q{i} " + "x" * 20_000).run_id for i in range(6)]  # ~40 KB a job: input and echo
    small = agent.run("a small one after them").run_id
    assert judgehooks.drain(60)
    by_run = {r.run_id: r for r in store.records}
    assert sorted(by_run) == sorted([*run_ids, small])  # one record per run, shed or graded
    assert by_run[run_ids[0]].status == "passed"
    skipped = [r for r in store.records if r.status == "skipped"]
    assert skipped and all("byte budget of 60000 bytes" in r.reason and "max_queue_bytes" in r.reason
                           for r in skipped)
    assert judge.stats()["queued_bytes"] == 0
    assert pending(tmp_path / "outbox.db") == 0


def test_the_outbox_wal_is_cut_back_after_checkpoints(tmp_path):
    from judgehooks._grading.outbox import Job, Outbox

    outbox = Outbox(tmp_path / "outbox.db", wal_limit=256 * 1024)
    reader = sqlite3.connect(tmp_path / "outbox.db")  # a reader now and then, as the dispatcher's scans are
    high = 0
    for i in range(120):
        outbox.put(Job(id=f"j{i}", evaluator="e", context={"output": "x" * 100_000}))  # through the WAL
        outbox.done([f"j{i}"])
        if i % 10 == 9:
            reader.execute("SELECT COUNT(*) FROM eval_jobs").fetchall()
            outbox.file.checkpoint()
            high = max(high, outbox.file.wal_size())
    assert high <= 256 * 1024
    outbox.close()


def test_an_idle_outbox_is_not_checkpointed_again_until_someone_writes(tmp_path):
    """The upkeep checkpoints once a second; with no commit since a checkpoint that folded the whole
    WAL there is nothing to fold, and the round asks SQLite's data_version, not for a checkpoint. Any
    commit (this process's or another's) makes the next round fold again."""
    from judgehooks._grading.outbox import Job, Outbox

    class Counting:  # the maintenance connection, counting the checkpoints it is asked for
        def __init__(self, conn):
            self.conn, self.folds = conn, 0

        def execute(self, sql, *args):
            self.folds += "wal_checkpoint" in sql
            return self.conn.execute(sql, *args)

    outbox = Outbox(tmp_path / "outbox.db")
    counting = Counting(outbox.file.maintenance())
    outbox.file._maint_conn = counting
    outbox.put(Job(id="j1", evaluator="e", context={}))
    outbox.file.checkpoint()
    assert counting.folds == 1
    outbox.file.checkpoint()
    outbox.file.checkpoint()
    assert counting.folds == 1  # idle: nothing folded again
    other = Outbox(tmp_path / "outbox.db")  # another writer of the same file (another process's)
    other.put(Job(id="j2", evaluator="e", context={}))
    outbox.file.checkpoint()
    assert counting.folds == 2
    outbox.put(Job(id="j3", evaluator="e", context={}))  # and this process's own, at once after
    outbox.file.checkpoint()
    assert counting.folds == 3
    assert pending(tmp_path / "outbox.db") == 3
    outbox.file._maint_conn = counting.conn
    other.close()
    outbox.close()


# ---- fork: a child's jobs are its own ----------------------------------------------------------------

def test_a_forked_childs_first_job_is_its_own_and_is_graded_once_the_child_is_gone(make_judge, make_agent, server,
                                                                                     tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    agent = make_agent(make_judge(store=store, run_in_background=True, judge_process=False))
    agent.run("in the parent")
    assert judgehooks.drain(30)
    server.configure(judge_delay_ms=60_000)  # the child's judge never answers before the child exits
    pid = os.fork()
    if pid == 0:  # the child: one run, whose job is persisted, then gone without grading it
        try:
            agent.run("in the child")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    server.configure(judge_delay_ms=0)
    # The parent lives on; the child's job must not wait for it to die: the parent claims it.
    wait_for(lambda: "in the child" in {r.input for r in store.query_sync(limit=None)}, timeout=60)
    assert sorted(r.input for r in store.query_sync(limit=None)) == ["in the child", "in the parent"]


def test_a_forked_child_files_its_first_job_under_its_own_owner_id(tmp_path):
    from judgehooks._grading.outbox import Job, Outbox

    outbox = Outbox(tmp_path / "outbox.db")
    outbox.put(Job(id="parent-job", evaluator="e", context={}))  # the parent's connection is open
    pid = os.fork()
    if pid == 0:
        try:
            outbox.put(Job(id="child-job", evaluator="e", context={}))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    owners = dict(connect(tmp_path / "outbox.db").execute("SELECT id, owner FROM eval_jobs"))
    assert owners["parent-job"] == outbox.owner and owners["child-job"] != outbox.owner
    assert [job.id for job in outbox.claim()] == ["child-job"]  # the child is gone: its job is claimable
    outbox.close()


def test_a_job_the_outbox_could_not_take_gives_its_bytes_back():
    from judgehooks._grading.budget import ByteBudget

    budget = ByteBudget(100)

    def disk_full() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        budget.admit("job-1", 60, disk_full)
    assert budget.held == 0  # else every later job would be shed, for good
    assert budget.admit("job-2", 60, None) is None and budget.held == 60
    assert "byte budget of 100 bytes" in (budget.admit("job-3", 60, None) or "")


def test_a_store_that_blips_while_a_batch_is_salvaged_keeps_every_verdict():
    """A batch fails, and while its records are written one by one the store blips once: the
    record it blipped on is retried, not replaced by an error record."""
    import anyio

    from judgehooks import EvalRecord
    from judgehooks.stores._base import write_salvaging

    class Blipping(MemoryStore):
        singles = 0

        async def write(self, records):
            if len(records) > 1:
                raise ConnectionError("batches fail")
            self.singles += 1
            if self.singles == 2:  # the second record, once
                raise ConnectionError("blip")
            await super().write(records)

    records = [EvalRecord(id=f"r{i}", status="passed", evaluator="e", mode="binary", passed=True) for i in range(3)]
    store = Blipping()
    stored, error = anyio.run(write_salvaging, store, records)
    assert error is None and [r.status for r in stored] == ["passed"] * 3
    assert sorted(r.id for r in store.records) == ["r0", "r1", "r2"]


def test_the_upkeeps_looks_at_a_deep_outbox_are_index_seeks_not_scans(tmp_path):
    """Every second the upkeep asks whose jobs the outbox holds, and stats() asks this owner's oldest:
    with 100,000 pending jobs a scan of their rows cost ~45 ms a look. Both are seeks in the owner
    index; a file made before it (with the old index by evaluator) gets it when opened."""
    from judgehooks._grading.outbox import FIRST_OWNER, NEXT_OWNER, OLDEST, Job, Outbox, claim_sql

    old = sqlite3.connect(tmp_path / "outbox.db")  # the schema an earlier version left
    old.execute("CREATE TABLE eval_jobs (id TEXT PRIMARY KEY, evaluator TEXT NOT NULL, spec TEXT, context TEXT "
                "NOT NULL, sample_rate REAL NOT NULL DEFAULT 1.0, created_at REAL NOT NULL, owner TEXT NOT NULL)")
    old.execute("CREATE INDEX ix_eval_jobs_evaluator ON eval_jobs (evaluator, created_at)")
    old.executemany("INSERT INTO eval_jobs VALUES (?, ?, NULL, '{}', 1.0, ?, ?)",  # two evaluators' jobs
                    [(f"job-{i}", "e" if i % 2 == 0 else "other", float(i), f"gone-host:{i % 3}:x")
                     for i in range(300)])
    old.commit()
    outbox = Outbox(tmp_path / "outbox.db")
    outbox.put(Job(id="mine", evaluator="e", context={}, created_at=1000.0))
    conn = sqlite3.connect(tmp_path / "outbox.db")
    indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND "
                                              "tbl_name = 'eval_jobs' AND sql IS NOT NULL")}
    assert indexes == {"ix_eval_jobs_owner_evaluator"}  # one index still: a put costs what it did
    dead = ["gone-host:0:x", "gone-host:1:x"]
    for sql, args in ((FIRST_OWNER, ()), (NEXT_OWNER, ("",)), (OLDEST, (outbox.owner, "e")),
                      (claim_sql(2, 1, 3), [*dead, "e"])):
        plan = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args))
        assert "ix_eval_jobs_owner_evaluator" in plan and "SCAN eval_jobs" not in plan, plan
    # the three owners nobody registered are found, this one is not; their jobs of "e" are claimed oldest first
    assert [job.id for job in outbox.claim(["e"], 3)] == ["job-0", "job-2", "job-4"]
    assert abs(outbox.oldest_age("e") - time.time()) < 60  # now ours, the claimed job-0 (filed at 0.0) is the oldest
    outbox.close()


# ---- rows another program wrote: one that does not read back sinks no query -------------------------

@pytest.mark.parametrize("corrupt", ["status = 'bogus'", "metadata = 'not json'", "created_at = 'garbage'",
                                     "input = X'ff00'", "details = 5", "score = 'high'",
                                     "details = '" + "[" * 100_000 + "'"])  # nested past Python's stack
def test_a_sqlite_row_that_does_not_read_back_is_an_error_record_and_the_others_still_read(corrupt, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    call = judgehooks._runtime.runtime.call
    call(store.write, [rec(i, agent_id="a") for i in range(3)])
    with sqlite3.connect(tmp_path / "evals.db") as conn:
        conn.execute(f"UPDATE eval_records SET {corrupt} WHERE id = 'id-1'")
    found = {r.id: r for r in call(store.query)}
    assert set(found) == {"id-0", "id-1", "id-2"}
    assert found["id-0"].status == found["id-2"].status == "passed"
    bad = found["id-1"]
    assert (bad.status, bad.passed, bad.score, bad.agent_id, bad.error_type) == ("error", None, None, "a", "StoreError")
    assert "does not read back" in bad.error_message
    assert [r.id for r in call(store.records_by_id, ["id-1"])] == ["id-1"]
    store.close()


def test_a_report_over_a_store_with_an_unreadable_row_counts_it_as_an_error(tmp_path):
    from _runner import run_cli

    store = SQLiteStore(tmp_path / "evals.db")
    judgehooks._runtime.runtime.call(store.write, [rec(i) for i in range(3)])
    store.close()
    with sqlite3.connect(tmp_path / "evals.db") as conn:
        conn.execute("UPDATE eval_records SET status = 'passed\x1b[2J', passed = 1 WHERE id = 'id-1'")
    done = run_cli("report", "--store", str(tmp_path / "evals.db"), "--since", "all", "--json")
    assert done.returncode == 0, done.stderr
    [group] = json.loads(done.stdout)["groups"]
    assert (group["count"], group["passed"], group["error"]) == (3, 2, 1)


def test_a_postgres_row_that_does_not_read_back_is_an_error_record(postgres_dsn):
    import psycopg

    from judgehooks import PostgresStore

    store = PostgresStore(postgres_dsn)
    call = judgehooks._runtime.runtime.call
    call(store.write, [rec(i) for i in range(2)])
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE eval_records SET status = 'bogus' WHERE id = 'id-1'")
    found = {r.id: r.status for r in call(store.query)}
    assert found == {"id-0": "passed", "id-1": "error"}
    # JSON PostgreSQL keeps but Python cannot read (nested past its stack) failed the fetch of every row
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE eval_records SET status = 'passed', details = %s::jsonb WHERE id = 'id-1'",
                     ("[" * 3000 + "]" * 3000,))
    found = {r.id: r.status for r in call(store.query)}
    assert found == {"id-0": "passed", "id-1": "error"}
    call(store.aclose)


@pytest.mark.parametrize("corrupt", ["created_at = 'garbage'", "score = 'high'", "reviewer = NULL"])
def test_a_label_row_that_does_not_read_back_is_skipped_and_the_others_still_read(corrupt, tmp_path):
    from judgehooks._base.label import Label

    store = SQLiteStore(tmp_path / "evals.db")
    call = judgehooks._runtime.runtime.call
    call(store.write_labels, [Label(record_id="id-0", reviewer=who, passed=True) for who in ("ann", "bob")])
    with sqlite3.connect(tmp_path / "evals.db") as conn:
        conn.execute(f"UPDATE eval_labels SET {corrupt} WHERE reviewer = 'bob'")
    assert [label.reviewer for label in call(store.read_labels)] == ["ann"]
    store.close()


def test_a_feedback_row_that_does_not_read_back_is_skipped_and_the_others_still_read(tmp_path):
    from judgehooks._base.feedback import Feedback

    store = SQLiteStore(tmp_path / "evals.db")
    call = judgehooks._runtime.runtime.call
    call(store.write_feedback, [Feedback(run_id=f"run-{i}", value="up", user_id=f"u{i}") for i in range(2)])
    with sqlite3.connect(tmp_path / "evals.db") as conn:
        conn.execute("UPDATE eval_feedback SET created_at = 'garbage' WHERE run_id = 'run-1'")
    assert [item.run_id for item in call(store.read_feedback)] == ["run-0"]
    store.close()


def test_a_postgres_label_row_that_does_not_read_back_is_skipped(postgres_dsn):
    import psycopg

    from judgehooks import PostgresStore
    from judgehooks._base.label import Label

    store = PostgresStore(postgres_dsn)
    call = judgehooks._runtime.runtime.call
    call(store.write_labels, [Label(record_id="id-0", reviewer=who, score=5) for who in ("ann", "bob")])
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE eval_records_labels SET score = 'NaN' WHERE reviewer = 'bob'")
    assert [label.reviewer for label in call(store.read_labels)] == ["ann"]
    call(store.aclose)


def test_a_labels_file_line_nested_past_pythons_stack_is_skipped_and_the_other_labels_read(tmp_path):
    """A JSONL store's labels file is a file anyone of its uid may write: a line of 100,000 `[`s raised
    RecursionError, and every label of the store read as none (calibration, review, the web app)."""
    from judgehooks import Label

    call = judgehooks._runtime.runtime.call
    store = JsonlStore(tmp_path / "evals.jsonl")
    call(store.write_labels, [Label(record_id="r-1", reviewer="ann", passed=True)])
    with open(store.labels_path, "a", encoding="utf-8") as fh:
        fh.write("[" * 100_000 + "\n")
    assert [(label.record_id, label.passed) for label in call(store.read_labels)] == [("r-1", True)]
