"""The job log (judgehooks/_grading/outbox.py): a put is one row of `eval_jobs`, `done` deletes it,
and a claim takes exactly the jobs of owners that are gone, once: across threads and processes,
after a kill, a chdir, a stalled heartbeat."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from _outbox import pending

from judgehooks._grading.journal import JournalLog
from judgehooks._grading.outbox import Job, JobLog, Outbox


def _table(path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {row[0] for row in conn.execute("SELECT id FROM eval_jobs")}
    finally:
        conn.close()


def test_the_outbox_is_a_job_log(tmp_path):
    log: JobLog = Outbox(tmp_path / "o.db")  # mypy checks the protocol; the calls below use only it
    log.put(Job(id="j", evaluator="e", context={"input": "q"}))
    assert log.oldest_age("e") is not None and log.claim() == []
    log.done(["j"])
    assert log.oldest_age("e") is None and pending(tmp_path / "o.db") == 0


@pytest.mark.parametrize("make", [Outbox, lambda path: JournalLog(Outbox(path))], ids=["sqlite", "journal"])
def test_two_writers_on_one_outbox_lose_nothing_and_keep_nothing_done(tmp_path, make):
    """Each job log: two writers' puts and dones interleaved (the journal folding now and then) leave
    exactly the jobs not done, in the file's table once folded."""
    path = tmp_path / "o.db"
    outboxes = [make(path), make(path)]
    kept: list[set[str]] = [set(), set()]

    def fold(outbox: JobLog) -> None:
        if isinstance(outbox, JournalLog):
            outbox.fold()

    def work(n: int) -> None:
        rng = random.Random(n)
        for i in range(300):
            job = f"p{n}-{i}"
            outboxes[n].put(Job(id=job, evaluator="e", context={}))
            if rng.random() < 0.7:
                outboxes[n].done([job])
            else:
                kept[n].add(job)
            if i % 37 == 0:
                fold(outboxes[n])

    threads = [threading.Thread(target=work, args=(n,)) for n in (0, 1)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert pending(path) == len(kept[0] | kept[1])
    [fold(o) for o in outboxes]
    assert _table(path) == kept[0] | kept[1]
    [o.close() for o in outboxes]


DIES = """
import os, sys
from judgehooks._grading.outbox import Job, Outbox
outbox = Outbox(sys.argv[1])
for job in ("a", "b", "c"):
    outbox.put(Job(id=job, evaluator="e", context={"input": job}))
outbox.done(["b"])
os._exit(0)  # no release: killed, as far as the file can tell
"""


def test_a_dead_processs_jobs_are_claimed_once(tmp_path):
    path = tmp_path / "o.db"
    subprocess.run([sys.executable, "-c", DIES, str(path)], check=True, timeout=60)
    assert pending(path) == 2
    outbox = Outbox(path)
    claimed = outbox.claim(["e"])
    assert sorted((job.id, job.context["input"]) for job in claimed) == [("a", "a"), ("c", "c")]
    assert outbox.claim(["e"]) == []  # claimed once
    assert pending(path) == 2  # still pending, now this owner's
    outbox.close()


def test_a_live_processs_jobs_are_not_taken(tmp_path):
    path = tmp_path / "o.db"
    alive, other = Outbox(path), Outbox(path)
    alive.put(Job(id="mine", evaluator="e", context={}))
    assert other.claim() == []  # its owner is alive
    alive.close()
    other.close()


def test_an_owner_taken_for_dead_registers_again_at_its_next_heartbeat(tmp_path):
    """A process stalled past `stale_after` may have its owner row removed by a claimer; its next
    heartbeat puts it back, so the jobs it still grades are not taken as a dead owner's."""
    path = tmp_path / "o.db"
    alive, other = Outbox(path), Outbox(path)
    alive.put(Job(id="mine", evaluator="e", context={}))
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM eval_owners WHERE owner = ?", (alive.owner,))
    alive.file.heartbeat()
    assert other.claim() == []
    alive.close()
    other.close()


def test_a_stale_heartbeat_makes_an_owner_on_another_host_gone(tmp_path):
    path = tmp_path / "o.db"
    outbox = Outbox(path, stale_after=30)
    outbox.put(Job(id="mine", evaluator="e", context={}))
    with sqlite3.connect(path) as conn:  # a process of another host that last beat a minute ago
        conn.execute("INSERT INTO eval_owners VALUES ('elsewhere:42:x', 'elsewhere', 42, ?)", (time.time() - 60,))
        conn.execute("INSERT INTO eval_jobs VALUES ('theirs', 'e', NULL, '{}', 1.0, 1.0, 'elsewhere:42:x')")
    assert [job.id for job in outbox.claim()] == ["theirs"]
    outbox.close()


def test_a_relative_outbox_path_stays_where_it_was_after_a_chdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outbox = Outbox("o.db")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    outbox.put(Job(id="j1", evaluator="e", context={}))  # the file is first opened here
    assert list((tmp_path / "elsewhere").iterdir()) == [] and pending(tmp_path / "o.db") == 1
    outbox.close()


def test_the_oldest_pending_age_is_this_owners_and_one_evaluators(tmp_path):
    path = tmp_path / "o.db"
    outbox = Outbox(path)
    assert outbox.oldest_age("e") is None
    outbox.put(Job(id="old", evaluator="e", context={}, created_at=1000.0))
    outbox.put(Job(id="other", evaluator="f", context={}, created_at=500.0))
    outbox.put(Job(id="new", evaluator="e", context={}, created_at=2000.0))
    assert outbox.oldest_age("e") > time.time() - 1000.5
    outbox.done(["old"])
    assert time.time() - 2000.5 < outbox.oldest_age("e") < time.time() - 1999.5
    outbox.done(["new"])
    assert outbox.oldest_age("e") is None and _table(path) == {"other"}
    outbox.close()


def test_a_put_of_the_same_id_twice_is_one_job(tmp_path):
    outbox = Outbox(tmp_path / "o.db")
    for _ in range(2):
        outbox.put(Job(id="same", evaluator="e", context={"input": "q"}))
    assert pending(tmp_path / "o.db") == 1
    outbox.close()


def test_a_file_that_is_not_sqlite_refuses_puts_by_name_and_loses_no_evaluation(tmp_path):
    from structlog.testing import capture_logs

    path = tmp_path / "o.db"
    path.write_bytes(os.urandom(4096))  # planted garbage where the outbox file goes
    outbox = Outbox(path)
    with capture_logs() as logs:
        outbox.put(Job(id="j", evaluator="e", context={}))
    [event] = [e for e in logs if e["event"] == "outbox_write_failed"]
    assert "DatabaseError" in event["error"] and outbox.refused == 1
    outbox.close()


@pytest.mark.parametrize("pid, heartbeat", [(2**40, None), ("9" * 20, None), (-1, None), ("one", None),
                                            (1, "now"), (1, 1e300), (1, float("inf"))])
def test_a_malformed_owner_row_neither_stops_the_claim_nor_holds_its_jobs(tmp_path, pid, heartbeat):
    """An `eval_owners` row this library never writes (a pid past the kernel's range, none at all or
    one that signals every process; a heartbeat that is text): every claim raised on it, so no dead
    process's jobs were ever taken again; or its owner never went (a heartbeat from the far future).
    Such an owner is gone: its jobs are claimed and its row removed."""
    from judgehooks._grading.outboxfile import HOST

    path = tmp_path / "o.db"
    outbox = Outbox(path)
    outbox.put(Job(id="mine", evaluator="e", context={}))
    beat = time.time() if heartbeat is None else heartbeat
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO eval_owners VALUES ('forged:1:f', ?, ?, ?)", (HOST, pid, beat))
        conn.execute("INSERT INTO eval_jobs VALUES ('theirs', 'e', NULL, '{}', 1.0, 1.0, 'forged:1:f')")
        conn.execute("INSERT INTO eval_jobs VALUES ('left', 'e', NULL, '{}', 1.0, 2.0, 'gone-host:1:x')")
    assert sorted(job.id for job in outbox.claim()) == ["left", "theirs"]
    with sqlite3.connect(path) as conn:
        assert [row[0] for row in conn.execute("SELECT owner FROM eval_owners")] == [outbox.owner]
    outbox.close()


def test_text_that_is_not_utf8_in_any_column_never_stops_the_claim(tmp_path):
    """Text columns whose bytes are not UTF-8 (another program's text, a hostile write): Python's
    sqlite3 raises as it reads such a value, inside the claim's transaction, so every claim raised
    and no dead process's jobs (an owner row: no one's) were taken again. They are read with U+FFFD
    in place of the bad bytes: each row is claimed once, and a context that is not UTF-8 is a job
    `job_context` refuses by name (the dispatcher's `error` record)."""
    from judgehooks._grading.outbox import job_context

    path = tmp_path / "o.db"
    outbox = Outbox(path)
    outbox.put(Job(id="mine", evaluator="e", context={}))
    bad = "CAST(X'6261ff64' AS TEXT)"  # "ba\xffd"
    with sqlite3.connect(path) as conn:
        conn.execute(f"INSERT INTO eval_owners VALUES ({bad}, 'elsewhere', 1, 0)")
        conn.execute(f"INSERT INTO eval_jobs VALUES ('context', 'e', NULL, {bad}, 1.0, 1.0, 'gone-host:1:x')")
        conn.execute(f"INSERT INTO eval_jobs VALUES ('spec', 'e', {bad}, '{{}}', 1.0, 2.0, 'gone-host:1:x')")
        conn.execute(f"INSERT INTO eval_jobs VALUES ({bad}, 'e', NULL, '{{}}', 1.0, 3.0, 'gone-host:1:x')")
    claimed = outbox.claim()
    assert [job.id for job in claimed] == ["context", "spec", "ba\ufffdd"]
    with pytest.raises(ValueError, match="not JSON"):
        job_context(claimed[0])
    assert claimed[1].spec == "ba\ufffdd" and outbox.claim() == []
    outbox.close()


def test_every_field_of_a_read_back_context_has_its_type_check():
    """`context_from_dict` checks each field of a job's context by its annotation: a field added with
    an annotation it has no JSON types for would make every job read back an `error` record."""
    from dataclasses import fields

    from judgehooks._base.context import _JSON_TYPES, _READ_APART, EvalContext, RunUsage, ToolCall

    for cls in (EvalContext, ToolCall, RunUsage):
        for spec in fields(cls):
            assert spec.name in _READ_APART or spec.type in _JSON_TYPES, (cls.__name__, spec.name, spec.type)
