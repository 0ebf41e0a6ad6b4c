"""The outbox's log (judgehooks/_grading/outboxlog.py): a put is one appended row, and folding the
log into `eval_jobs` keeps exactly the jobs put and not yet done, whoever folds, whenever, in
whatever chunks."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import threading

import pytest
from _outbox import pending

from judgehooks._grading.outbox import Job, Outbox
from judgehooks._grading.outboxlog import fold_some


def _folded(path) -> tuple[set[str], int]:
    conn = sqlite3.connect(path)
    try:
        jobs = {row[0] for row in conn.execute("SELECT id FROM eval_jobs")}
        return jobs, conn.execute("SELECT COUNT(*) FROM eval_jobs_log").fetchone()[0]
    finally:
        conn.close()


def test_a_put_is_one_row_in_the_log_and_touches_no_index(tmp_path):
    outbox = Outbox(tmp_path / "o.db")
    outbox.put(Job(id="j1", evaluator="e", context={"input": "q"}))
    assert _folded(tmp_path / "o.db") == (set(), 1)  # nothing in the indexed table yet
    conn = sqlite3.connect(tmp_path / "o.db")
    assert conn.execute("PRAGMA index_list(eval_jobs_log)").fetchall() == []  # one b-tree: the rows themselves
    outbox.delete(["j1"])
    assert pending(tmp_path / "o.db") == 0
    outbox.fold()
    assert _folded(tmp_path / "o.db") == (set(), 0)  # put and done within one fold: eval_jobs never saw it
    outbox.close()


@pytest.mark.parametrize("seed", range(12))
def test_folding_in_any_chunks_at_any_time_keeps_exactly_the_jobs_not_done(tmp_path, seed):
    """A model (a set: put adds, done removes) beside the outbox, through random puts (again, after
    done, twice), dones (of jobs never put too) and folds of random sizes from another connection."""
    rng = random.Random(seed)
    path = tmp_path / "o.db"
    outbox = Outbox(path)
    outbox.fold()  # the file and its tables exist from here on
    folder = sqlite3.connect(path, isolation_level=None)  # another connection folds: as another process would
    model: set[str] = set()
    for step in range(400):
        roll = rng.random()
        if roll < 0.45:
            job = f"j{rng.randrange(25)}"
            outbox.put(Job(id=job, evaluator=f"e{rng.randrange(2)}", context={"step": step}))
            model.add(job)
        elif roll < 0.85:
            done = [f"j{rng.randrange(25)}" for _ in range(rng.randrange(1, 4))]
            outbox.delete(done)
            model.difference_update(done)
        else:
            fold_some(folder, rng.choice([1, 2, 3, 8, 64]))
        if step % 20 == 0:
            assert pending(path) == len(model), step
    assert pending(path) == len(model)
    outbox.fold()
    assert _folded(path) == (model, 0)
    folder.close()
    outbox.close()


def test_two_processes_folding_the_same_file_lose_nothing_and_keep_nothing_done(tmp_path):
    path = tmp_path / "o.db"
    outboxes = [Outbox(path), Outbox(path)]
    kept: list[set[str]] = [set(), set()]

    def work(n: int) -> None:
        rng = random.Random(n)
        for i in range(300):
            job = f"p{n}-{i}"
            outboxes[n].put(Job(id=job, evaluator="e", context={}))
            if rng.random() < 0.7:
                outboxes[n].delete([job])
            else:
                kept[n].add(job)
            if i % 37 == 0:
                outboxes[n].fold()

    threads = [threading.Thread(target=work, args=(n,)) for n in (0, 1)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    outboxes[0].fold()
    assert _folded(path) == (kept[0] | kept[1], 0)
    [o.close() for o in outboxes]


DIES = """
import os, sys
from judgehooks._grading.outbox import Job, Outbox
outbox = Outbox(sys.argv[1])
for job in ("a", "b", "c"):
    outbox.put(Job(id=job, evaluator="e", context={"input": job}))
outbox.delete(["b"])
os._exit(0)  # no fold, no release: killed, as far as the file can tell
"""


def test_a_dead_processs_jobs_still_in_the_log_are_claimed(tmp_path):
    path = tmp_path / "o.db"
    subprocess.run([sys.executable, "-c", DIES, str(path)], check=True, timeout=60)
    assert _folded(path) == (set(), 4)  # all of it in the log: three puts and a done
    outbox = Outbox(path)
    claimed = outbox.claim(["e"])
    assert sorted((job.id, job.context["input"]) for job in claimed) == [("a", "a"), ("c", "c")]
    assert outbox.claim(["e"]) == []  # claimed once
    outbox.close()
