"""The job log's journal (judgehooks/_grading/journal.py, `JournalLog`): a put is one line appended to
this process's own file, and folding the files into `eval_jobs` keeps exactly the jobs put and not yet
done: whenever it runs, a file folded twice, a dead process's files, a fork, hostile lines."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
import time

import pytest
from _outbox import GONE, GONE_TAG, pending
from structlog.testing import capture_logs

from judgehooks._grading.journal import JournalFile, JournalLog, apply, journal_files
from judgehooks._grading.outbox import Job, Outbox


def journal_log(path) -> JournalLog:
    """The journal log, with the outbox file it folds into."""
    return JournalLog(Outbox(path))


def _table(path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {row[0] for row in conn.execute("SELECT id FROM eval_jobs")}
    finally:
        conn.close()


def test_a_put_is_one_line_in_this_processs_own_file_and_no_sqlite_write(tmp_path):
    path = tmp_path / "o.db"
    outbox = journal_log(path)
    outbox.put(Job(id="j1", evaluator="e", context={"input": "q"}))
    [file] = journal_files(str(path))
    assert file.tag == outbox.outbox.owner.rsplit(":", 1)[1] and stat.S_IMODE(os.stat(file.path).st_mode) == 0o600
    assert open(file.path, "rb").read().count(b"\n") == 1
    assert _table(path) == set() and pending(path) == 1  # not in the indexed table, still pending
    outbox.fold()
    assert _table(path) == {"j1"} and journal_files(str(path)) == []  # folded, the file gone
    outbox.put(Job(id="j2", evaluator="e", context={}))
    outbox.done(["j1", "j2"])
    assert pending(path) == 0
    outbox.fold()
    assert _table(path) == set() and journal_files(str(path)) == []
    outbox.close()


def test_the_upkeeps_fold_takes_the_file_being_written_only_once_it_is_due(tmp_path, monkeypatch):
    """`fold(due=True)`: the file being written stays (its jobs mostly finish first) until it is
    `FOLD_AGE_S` old or `FOLD_BYTES` long, or its dispatcher is idle; a plain `fold()` (exit) takes it at once."""
    from judgehooks._grading import journal

    path = tmp_path / "o.db"
    outbox = journal_log(path)
    outbox.put(Job(id="j1", evaluator="e", context={"input": "q"}))
    outbox.fold(due=True)
    assert _table(path) == set() and len(journal_files(str(path))) == 1  # young and short: not due
    monkeypatch.setattr(journal, "FOLD_BYTES", 200)
    outbox.put(Job(id="j2", evaluator="e", context={"input": "x" * 200}))
    outbox.fold(due=True)  # long enough
    assert _table(path) == {"j1", "j2"} and journal_files(str(path)) == []
    outbox.put(Job(id="j3", evaluator="e", context={}))
    monkeypatch.setattr(journal, "FOLD_AGE_S", 0.0)
    outbox.fold(due=True)  # old enough
    assert _table(path) == {"j1", "j2", "j3"} and journal_files(str(path)) == []
    monkeypatch.setattr(journal, "FOLD_AGE_S", 3600.0)
    monkeypatch.setattr(journal, "FOLD_BYTES", 1 << 30)
    outbox.put(Job(id="j5", evaluator="e", context={}))
    outbox.done(["j1", "j2", "j3", "j5"])  # folded: gone from the table at once; j5: a done line
    assert _table(path) == set() and pending(path) == 0 and len(journal_files(str(path))) == 1
    outbox.fold()
    assert _table(path) == set() and journal_files(str(path)) == []
    outbox.put(Job(id="j4", evaluator="e", context={}))
    outbox.fold(due=True, idle=True)  # its writer is idle, but a job was put a moment ago: it may be on its way
    assert _table(path) == set() and len(journal_files(str(path))) == 1
    monkeypatch.setattr(journal, "FOLD_QUIET_S", 0.0)
    outbox.upkeep(idle=True)  # the dispatcher's upkeep, idle, and no put since: folded at once
    assert _table(path) == {"j4"} and journal_files(str(path)) == []
    outbox.close()


def test_a_put_done_later_in_its_file_is_left_out_and_only_that_put(tmp_path):
    """The fold leaves out the puts a later `done` in the file finishes, and only those: ids with
    quotes, escapes and non-ASCII text, and a look-alike id never taken for one."""
    path = tmp_path / "o.db"
    outbox = journal_log(path)
    for job in ('a"b', "plain", "é-id", "other"):
        outbox.put(Job(id=job, evaluator="e", context={"input": job}))
    outbox.done(["a\\", "plain", "é-id"])  # "a\\" is what the line of 'a"b' starts with, up to its escape
    outbox.fold()
    assert _table(path) == {'a"b', "other"}
    outbox.put(Job(id='x"y', evaluator="e", context={}))
    outbox.done(['x"y'])
    outbox.fold()
    assert _table(path) == {'a"b', "other"}
    outbox.close()

@pytest.mark.parametrize("seed", range(10))
def test_folding_at_any_time_and_a_file_folded_twice_keep_exactly_the_jobs_not_done(tmp_path, seed):
    """A model (a set: put adds, done removes) beside the outbox, through random puts (again, after
    done, twice), dones (of jobs never put too) and folds; the files of a fold are sometimes folded
    again after it, as a claimer does when their writer died between the commit and the delete."""
    rng = random.Random(seed)
    path = tmp_path / "o.db"
    outbox = journal_log(path)
    refold = sqlite3.connect(path, isolation_level=None)
    model: set[str] = set()
    copies: list[JournalFile]
    for step in range(400):
        roll = rng.random()
        if roll < 0.45:
            job = f"j{rng.randrange(25)}"
            outbox.put(Job(id=job, evaluator=f"e{rng.randrange(2)}", context={"step": step}))
            model.add(job)
        elif roll < 0.85:
            done = [f"j{rng.randrange(25)}" for _ in range(rng.randrange(1, 4))]
            outbox.done(done)
            model.difference_update(done)
        else:
            copies = []
            for file in journal_files(str(path)):
                copies.append(JournalFile(str(tmp_path / f"copy-{file.seq}"), file.tag, file.seq))
                shutil.copy(file.path, copies[-1].path)
            outbox.fold()
            if copies and rng.random() < 0.5:  # folded again, as by a claimer when the writer died before the delete
                refold.execute("BEGIN IMMEDIATE")
                for copy in copies:
                    apply(refold, copy)
                refold.execute("COMMIT")
        if step % 20 == 0:
            assert pending(path) == len(model), step
    outbox.fold()
    assert _table(path) == model and journal_files(str(path)) == []
    refold.close()
    outbox.close()


DIES = """
import os, sys
from judgehooks._grading.journal import JournalLog
from judgehooks._grading.outbox import Job, Outbox
outbox = JournalLog(Outbox(sys.argv[1]))
for job in ("a", "b", "c"):
    outbox.put(Job(id=job, evaluator="e", context={"input": job}))
outbox.done(["b"])
os._exit(0)  # no fold, no release: killed, as far as the files can tell
"""


def test_a_dead_processs_journal_is_folded_and_its_jobs_claimed_once(tmp_path):
    path = tmp_path / "o.db"
    subprocess.run([sys.executable, "-c", DIES, str(path)], check=True, timeout=60)
    [file] = journal_files(str(path))
    assert _table(path) == set() and pending(path) == 2  # all of it in the dead process's file
    outbox = journal_log(path)
    claimed = outbox.claim(["e"])
    assert sorted((job.id, job.context["input"]) for job in claimed) == [("a", "a"), ("c", "c")]
    assert not os.path.exists(file.path)  # folded and removed after the commit
    assert outbox.claim(["e"]) == []  # claimed once
    outbox.close()


def test_a_live_processs_journal_is_not_taken(tmp_path):
    path = tmp_path / "o.db"
    alive, other = journal_log(path), Outbox(path)
    alive.put(Job(id="mine", evaluator="e", context={}))
    assert other.claim() == []  # its owner is alive: its file is its own to fold
    assert len(journal_files(str(path))) == 1
    alive.close()
    other.close()


def test_hostile_journal_lines_are_skipped_and_named_and_the_good_jobs_still_come(tmp_path):
    """A dead owner's file with garbage, a done that is not a list, a put with a bad context, a put
    for another owner, a torn last line; and a symlink named like a journal file. Nothing crashes; every
    line that is a job is claimed."""
    path = tmp_path / "o.db"
    good = json.dumps(["good", "e", None, 1.0, 1.0, GONE]).encode()
    lines = [b"P\t" + good + b'\t{"input": "q"}',
             b"\x00\xff not a line of ours",
             b"D\t{\"not\": \"a list\"}",
             b"P\t" + json.dumps(["bad-context", "e", None, 1.0, 1.0, GONE]).encode() + b"\t{not json",
             b"P\t" + json.dumps(["forged", "e", None, 1.0, 1.0, "host:1:someone-alive"]).encode() + b"\t{}",
             b"P\t[1, 2, 3]\t{}",
             b"P\t" + json.dumps(["torn", "e", None, 1.0, 1.0, GONE]).encode() + b'\t{"inp']
    (tmp_path / f"o.db.jobs.{GONE_TAG}.00000001").write_bytes(b"\n".join(lines))  # the last line has no end
    secret = tmp_path / "secret"
    secret.write_bytes(b"P\t" + json.dumps(["stolen", "e", None, 1.0, 1.0, GONE]).encode() + b"\t{}\n")
    os.symlink(secret, tmp_path / "o.db.jobs.zzzz.00000001")
    outbox = journal_log(path)
    outbox.fold()  # the file and its tables exist
    with capture_logs() as logs:
        claimed = outbox.claim()
    assert [job.id for job in claimed] == ["good"]
    bad = [e for e in logs if e["event"] in ("outbox_journal_bad_line", "outbox_journal_bad_job")]
    assert sorted((e["event"], e.get("line"), e.get("job_id")) for e in bad) == [
        ("outbox_journal_bad_job", None, "bad-context"), ("outbox_journal_bad_job", None, "forged"),
        ("outbox_journal_bad_line", 2, None), ("outbox_journal_bad_line", 3, None),
        ("outbox_journal_bad_line", 6, None)]
    outbox.close()


def test_a_journal_that_cannot_be_written_hands_the_put_to_the_outbox_file_and_the_next_file_takes_jobs(tmp_path):
    """A full disk for the journal: its file descriptor is /dev/full (ENOSPC from the kernel). The
    put goes to the SQLite put instead (which refuses and counts it when it cannot take it either:
    tests/grading/test_background.py), never raised into the hook; a new file takes jobs again."""
    path = tmp_path / "o.db"
    outbox = journal_log(path)
    outbox.put(Job(id="before", evaluator="e", context={}))
    assert outbox._fd is not None
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, outbox._fd)
    os.close(full)
    with capture_logs() as logs:
        outbox.put(Job(id="fell-back", evaluator="e", context={}))
        outbox.put(Job(id="fell-back-too", evaluator="e", context={}))
        assert outbox.refused == 0 and _table(path) == {"fell-back", "fell-back-too"}
        with outbox._lock:
            outbox._seal()  # the outage is over: the next put opens a new file
        outbox.put(Job(id="after", evaluator="e", context={}))
    warned = [e for e in logs if e["event"] == "outbox_journal_write_failed"]
    assert [e["log_level"] for e in warned] == ["warning", "debug"] and "No space left" in warned[0]["error"]
    assert _table(path) == {"fell-back", "fell-back-too"} and pending(path) == 4
    outbox.done(["fell-back", "after"])  # one from the table, one a done line
    outbox.fold()
    assert _table(path) == {"before", "fell-back-too"}  # "before" was in the file before its descriptor went bad
    outbox.close()


def test_an_owner_taken_for_dead_registers_again_at_its_next_heartbeat(tmp_path):
    """A process stalled past `stale_after` may have its owner row removed by a claimer; its next
    heartbeat puts it back, so the file it still writes is not taken as a dead owner's."""
    path = tmp_path / "o.db"
    alive, other = journal_log(path), Outbox(path)
    alive.put(Job(id="mine", evaluator="e", context={}))
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM eval_owners WHERE owner = ?", (alive.outbox.owner,))
    alive.outbox.file.heartbeat()
    assert other.claim() == [] and len(journal_files(str(path))) == 1
    alive.close()
    other.close()


def test_a_file_its_writer_still_holds_is_not_taken_from_an_owner_taken_for_dead(tmp_path):
    """An owner stalled past `stale_after` (or whose pid lives in another namespace) looks dead; its
    current file is still locked by its writer, so a claimer leaves it, and the lines written after
    the claim are not lost in a deleted file."""
    path = tmp_path / "o.db"
    writer, claimer = journal_log(path), Outbox(path)
    writer.put(Job(id="j1", evaluator="e", context={}))
    with sqlite3.connect(path) as conn:  # taken for dead: its row gone, as a claim removes a dead owner's
        conn.execute("DELETE FROM eval_owners WHERE owner = ?", (writer.outbox.owner,))
    assert claimer.claim() == [] and len(journal_files(str(path))) == 1
    writer.put(Job(id="j2", evaluator="e", context={}))
    writer.fold()
    assert _table(path) == {"j1", "j2"}
    writer.close()
    claimer.close()


def test_a_fifo_and_lines_no_json_parser_survives_never_stall_or_stop_the_claim(tmp_path):
    path = tmp_path / "o.db"
    os.mkfifo(tmp_path / "o.db.jobs.fifo.00000001")  # opened for reading, a FIFO would block forever
    good = b"P\t" + json.dumps(["good", "e", None, 1.0, 1.0, GONE]).encode() + b"\t{}"
    lines = [b"D\t" + b"[" * 100_000,  # past the recursion limit
             b'P\t["\\ud800", "e", null, 1.0, 1.0, "gone-host:1:x"]\t{}',  # an id SQLite cannot store
             b'P\t["big", "e", null, 1e999, 1.0, "gone-host:1:x"]\t{}',  # a rate past a float's range
             b'P\t["huge", "e", null, ' + b"9" * 400 + b', 1.0, "gone-host:1:x"]\t{}',
             good]
    (tmp_path / f"o.db.jobs.{GONE_TAG}.00000001").write_bytes(b"\n".join(lines) + b"\n")
    outbox = journal_log(path)
    outbox.fold()
    claimed: list[list[Job]] = []
    thread = threading.Thread(target=lambda: claimed.append(outbox.claim()), daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the claim stalled"
    assert [job.id for job in claimed[0]] == ["good"]
    assert journal_files(str(path)) == []  # both folded (nothing to read in the FIFO) and removed
    outbox.close()


def test_a_write_that_tears_a_line_keeps_the_next_ones_on_lines_of_their_own(tmp_path):
    """A write that stops part-way (here a full non-blocking pipe in place of the file) leaves part
    of a line; a later put that writes nothing must not forget it, and the first that writes starts
    on a line of its own."""
    outbox = journal_log(tmp_path / "o.db")
    outbox.put(Job(id="first", evaluator="e", context={}))
    assert outbox._fd is not None
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    os.dup2(write_end, outbox._fd)
    os.close(write_end)
    outbox.put(Job(id="torn", evaluator="e", context={"output": "x" * 200_000}))  # fills the pipe part-way
    outbox.put(Job(id="nothing", evaluator="e", context={}))  # the pipe is full: not a byte
    assert outbox.refused == 0 and _table(tmp_path / "o.db") == {"torn", "nothing"}  # the outbox file took them
    written = b""
    os.set_blocking(read_end, False)
    while True:
        try:
            chunk = os.read(read_end, 1 << 16)
        except BlockingIOError:
            break
        written += chunk
    outbox.put(Job(id="after", evaluator="e", context={}))
    after = os.read(read_end, 1 << 16)
    assert written and not written.endswith(b"\n") and after.startswith(b"\nP\t")
    assert json.loads(after[3:].split(b"\t")[0])[0] == "after"
    os.close(read_end)
    outbox.close()


def test_a_file_planted_under_the_next_journal_name_is_neither_written_nor_folded_as_ours(tmp_path):
    path = tmp_path / "o.db"
    outbox = journal_log(path)
    outbox.put(Job(id="mine", evaluator="e", context={}))
    outbox.fold()
    planted = outbox._name(outbox._seq + 1)
    forged = json.dumps(["forged", "e", None, 1.0, 1.0, outbox.outbox.owner]).encode()
    with open(os.open(planted, os.O_WRONLY | os.O_CREAT, 0o644), "wb") as file:
        file.write(b"P\t" + forged + b"\t{}\n")
    outbox.put(Job(id="next", evaluator="e", context={}))
    [file] = [f for f in journal_files(str(path)) if f.path != planted]
    assert outbox.claim() == []  # the planted file has this live owner's name: not a dead one's to take
    assert stat.S_IMODE(os.stat(file.path).st_mode) == 0o600 and b"next" in open(file.path, "rb").read()
    outbox.fold()
    assert _table(path) == {"mine", "next"}  # the planted file is not one of this owner's to fold
    outbox.close()


def test_a_relative_outbox_path_keeps_its_journal_beside_the_outbox_after_a_chdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outbox = journal_log("o.db")
    outbox.put(Job(id="j1", evaluator="e", context={}))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    outbox.fold()
    outbox.put(Job(id="j2", evaluator="e", context={}))
    assert list((tmp_path / "elsewhere").iterdir()) == [] and pending(tmp_path / "o.db") == 2
    outbox.close()


def test_the_oldest_pending_age_reads_the_table_and_the_unfolded_journal_and_writes_nothing(tmp_path):
    path = tmp_path / "o.db"
    outbox = journal_log(path)
    assert outbox.oldest_age("e") is None
    outbox.put(Job(id="old", evaluator="e", context={}, created_at=1000.0))
    outbox.put(Job(id="other", evaluator="f", context={}, created_at=500.0))
    outbox.fold()  # "old" is in eval_jobs now
    outbox.put(Job(id="new", evaluator="e", context={}, created_at=2000.0))
    files = journal_files(str(path))
    assert outbox.oldest_age("e") > time.time() - 1000.5
    outbox.done(["old"])  # folded already: its row goes
    assert time.time() - 2000.5 < outbox.oldest_age("e") < time.time() - 1999.5
    outbox.done(["new"])  # a done line beside its put
    assert outbox.oldest_age("e") is None
    assert journal_files(str(path)) == files and _table(path) == {"other"}  # nothing folded by asking
    outbox.close()


def test_a_line_longer_than_the_limit_is_a_bad_line_and_the_next_one_still_reads(tmp_path, monkeypatch):
    from judgehooks._grading import journal

    monkeypatch.setattr(journal, "MAX_LINE", 300)  # 64 MiB in use: the same code path, a smaller number
    path = tmp_path / "o.db"
    good = b"P\t" + json.dumps(["good", "e", None, 1.0, 1.0, GONE]).encode() + b"\t{}"
    long = b"P\t" + json.dumps(["long", "e", None, 1.0, 1.0, GONE]).encode() + b'\t{"x": "' + b"y" * 1000 + b'"}'
    (tmp_path / f"o.db.jobs.{GONE_TAG}.00000001").write_bytes(long + b"\n" + good + b"\n")
    outbox = journal_log(path)
    outbox.fold()
    with capture_logs() as logs:
        assert [job.id for job in outbox.claim()] == ["good"]
    assert [(e["event"], e["line"]) for e in logs if e["event"] == "outbox_journal_bad_line"] == [
        ("outbox_journal_bad_line", 1)]
    outbox.close()


FORKS = """
import os, sys
from judgehooks._grading.journal import JournalLog, journal_files
from judgehooks._grading.outbox import Job, Outbox
log = JournalLog(Outbox(sys.argv[1]))
log.put(Job(id="parent", evaluator="e", context={}))
parent_owner = log.outbox.owner
pid = os.fork()
if pid == 0:
    log.reset_after_fork()  # what the runtime's fork handler does
    log.put(Job(id="child", evaluator="e", context={}))
    tags = {f.tag for f in journal_files(sys.argv[1])}
    ok = log.outbox.owner != parent_owner and len(tags) == 2
    os._exit(0 if ok else 3)  # killed, as far as its file can tell
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
log.put(Job(id="parent-after", evaluator="e", context={}))
claimed = log.claim(["e"])  # the dead child's file: folded and claimed; the parent's own is not taken
assert [job.id for job in claimed] == ["child"], claimed
log.done(["child"])
log.fold()
print(sorted(r[0] for r in log.outbox.file.connect().execute("SELECT id FROM eval_jobs")))
"""


def test_a_forked_child_writes_a_file_of_its_own_under_a_new_owner(tmp_path):
    out = subprocess.run([sys.executable, "-c", FORKS, str(tmp_path / "o.db")], check=True, timeout=60,
                         capture_output=True, text=True)
    assert out.stdout.strip() == "['parent', 'parent-after']"


def test_a_directory_or_an_odd_sequence_under_a_journal_name_never_stops_the_claim_or_the_report(tmp_path):
    """A directory named like a dead owner's journal file (opened, it raised IsADirectoryError), or a
    name whose sequence `str.isdigit` takes and `int()` refuses (a superscript digit): every claim
    raised on it, so no dead process's jobs were taken again, and `judgehooks report` failed. Neither
    is a journal file: the claim takes the jobs, and the report counts them."""
    from _outbox import pending

    path = tmp_path / "o.db"
    (tmp_path / f"o.db.jobs.{GONE_TAG}.00000001").mkdir()
    (tmp_path / f"o.db.jobs.{GONE_TAG}.\u00b2").write_bytes(b"")
    good = json.dumps(["good", "e", None, 1.0, 1.0, GONE]).encode()
    (tmp_path / f"o.db.jobs.{GONE_TAG}.00000002").write_bytes(b"P\t" + good + b"\t{}\n")
    outbox = journal_log(path)
    outbox.outbox.file.heartbeat()  # the file and its tables exist
    assert pending(path) == 1
    assert [job.id for job in outbox.claim()] == ["good"]
    assert outbox.claim() == []  # and again: nothing raises
    assert [f.seq for f in journal_files(str(path))] == []
    outbox.close()


def test_folding_a_large_journal_file_holds_one_line_in_memory_not_the_file(tmp_path):
    """A fold kept every put of a file in a list (each context whole) before it inserted any: a dead
    owner's file of many GB (planted, or no fold for a long time) was that much memory in every
    process that claimed it. It reads the file twice now (its dones, then its puts, inserted as
    they are read): memory holds one line and the ids done, whatever the file's size."""
    import tracemalloc

    path = tmp_path / "o.db"
    line = b"\t" + json.dumps({"input": "q" * 1_000_000}).encode() + b"\n"
    with open(tmp_path / f"o.db.jobs.{GONE_TAG}.00000001", "wb") as file:
        for i in range(40):  # 40 MB
            file.write(b"P\t" + json.dumps([f"j{i}", "e", None, 1.0, float(i), GONE]).encode() + line)
        file.write(b"D\t" + json.dumps(["j0"]).encode() + b"\n")
    outbox = journal_log(path)
    outbox.outbox.file.heartbeat()  # the file and its tables exist
    tracemalloc.start()
    try:
        claimed = outbox.claim(limit=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [job.id for job in claimed] == ["j1"] and pending(path) == 39
    assert peak < 15_000_000, peak
    outbox.close()


def test_a_journal_line_nested_past_pythons_stack_is_skipped_and_never_stops_the_claim(tmp_path):
    """A dead owner's file whose put holds a context, a head or a done of 100,000 `[`s: the context
    raised RecursionError in the fold, and every claim of every process failed from then on."""
    path = tmp_path / "o.db"
    good = json.dumps(["good", "e", None, 1.0, 1.0, GONE]).encode()
    lines = [b"P\t" + good + b'\t{"input": "q"}',
             b"P\t" + json.dumps(["deep", "e", None, 1.0, 1.0, GONE]).encode() + b"\t" + b"[" * 100_000,
             b"P\t" + b"[" * 100_000 + b"\t{}",
             b"D\t" + b"[" * 100_000, b""]
    (tmp_path / f"o.db.jobs.{GONE_TAG}.00000001").write_bytes(b"\n".join(lines))
    outbox = journal_log(path)
    outbox.fold()
    with capture_logs() as logs:
        assert [job.id for job in outbox.claim()] == ["good"]
    assert [(e["event"], e.get("job_id")) for e in logs if e["event"] == "outbox_journal_bad_job"] == [
        ("outbox_journal_bad_job", "deep")]
    outbox.close()
