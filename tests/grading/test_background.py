"""Background grading: hand-off, bounds, overload policies, outages, crash recovery, drain, sampling."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from _outbox import pending

import judgehooks
from judgehooks import SQLiteStore


@pytest.fixture
def make_bg(make_judge, tmp_path):
    def make(**kw):
        kw.setdefault("outbox", str(tmp_path / "outbox.db"))
        return make_judge(run_in_background=True, **kw)

    return make


def test_run_returns_before_a_slow_judge_answers(make_bg, make_agent, store, server):
    server.configure(judge_delay_ms=1500)
    judge = make_bg()
    judge.judge.warm_up()  # start the judge process now, so only the judge's own delay is measured
    out = make_agent(judge).run("q")
    assert store.records == []  # the judge is still thinking; the run is already back
    assert judge.stats()["submitted"] == 1
    assert judgehooks.drain(30)
    [r] = store.records
    assert r.run_id == out.run_id and r.status == "passed"


def test_asyncio_run_per_request_and_threads_are_all_graded(make_bg, make_agent, store):
    judge = make_bg()
    run_ids: list[str] = []
    lock = threading.Lock()

    def request(i: int) -> None:  # a fresh agent per request, as a web handler would build one
        out = asyncio.run(make_agent(judge).arun(f"request {i}"))
        with lock:
            run_ids.append(out.run_id)

    for i in range(5):
        request(i)
    threads = [threading.Thread(target=request, args=(i,)) for i in range(5, 15)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert judgehooks.drain(30)
    assert sorted(r.run_id for r in store.records) == sorted(run_ids) and len(run_ids) == 15


@pytest.mark.parametrize("policy", ["drop_newest", "drop_oldest"])
def test_drop_policies_shed_into_skipped_records(make_bg, make_agent, store, server, policy):
    server.configure(judge_delay_ms=300)
    dropped = []
    judge = make_bg(max_queue=2, max_concurrency=1, overload=policy, on_drop=dropped.append)
    agent = make_agent(judge)
    run_ids = [agent.run(f"q{i}").run_id for i in range(8)]
    assert judgehooks.drain(30)
    by_run = {r.run_id: r for r in store.records}
    assert sorted(by_run) == sorted(run_ids)  # exactly one record per run
    skipped = [r for r in store.records if r.status == "skipped"]
    assert skipped and len(dropped) == len(skipped) == judge.stats()["dropped"]
    assert all(policy in r.reason for r in skipped)
    if policy == "drop_newest":
        assert by_run[run_ids[0]].status == "passed" and by_run[run_ids[-1]].status == "skipped"
    else:
        assert by_run[run_ids[-1]].status == "passed"


def test_block_policy_times_out_into_skipped_and_otherwise_waits(make_bg, make_agent, store, server):
    server.configure(judge_delay_ms=300)
    impatient = make_bg(name="impatient", max_queue=1, max_concurrency=1, overload="block", block_timeout=0.01)
    agent = make_agent(impatient)
    for i in range(5):
        agent.run(f"q{i}")
    assert judgehooks.drain(30)
    statuses = [r.status for r in store.records if r.evaluator == "impatient"]
    assert len(statuses) == 5 and "skipped" in statuses and "passed" in statuses
    patient = make_bg(name="patient", max_queue=1, max_concurrency=1, overload="block", block_timeout=30)
    agent = make_agent(patient)
    for i in range(4):
        agent.run(f"p{i}")
    assert judgehooks.drain(30)
    assert [r.status for r in store.records if r.evaluator == "patient"] == ["passed"] * 4


def test_an_outage_then_recovery_loses_nothing(make_bg, make_agent, store, server):
    server.configure(judge_fail_next=12, judge_fail_status=503)
    errors = []
    judge = make_bg(retries=3, retry_backoff=0.05, max_concurrency=4, on_error=errors.append)
    agent = make_agent(judge)
    run_ids = [agent.run(f"q{i}").run_id for i in range(10)]
    assert judgehooks.drain(30)
    records = {r.run_id: r for r in store.records}
    assert sorted(records) == sorted(run_ids)
    assert all(r.status in ("passed", "error") for r in records.values())
    assert sum(r.status == "passed" for r in records.values()) >= 6
    assert len(errors) == sum(r.status == "error" for r in records.values())
    assert judge.stats()["retries"] >= 12 - len(errors) * 4


def test_sampling_counts_and_weights(make_bg, make_agent, store):
    judge = make_bg(sample_rate=0.5, when=lambda ctx: "skip-me" not in ctx.input)
    agent = make_agent(judge)
    for i in range(60):
        agent.run(f"q{i}")
    for i in range(5):
        agent.run(f"skip-me {i}")
    assert judgehooks.drain(30)
    stats = judge.stats()
    assert stats["filtered_out"] == 5
    assert stats["sampled_out"] + len(store.records) == 60 and 10 < len(store.records) < 50
    assert all(r.sample_rate == 0.5 for r in store.records)


def test_sampling_also_applies_inline(make_judge, make_agent, store):
    judge = make_judge(sample_rate=lambda ctx: 0.0 if "cheap" in ctx.input else 1.0)
    agent = make_agent(judge)
    agent.run("cheap question")
    agent.run("important question")
    assert [r.input for r in store.records] == ["important question"]
    assert judge.stats()["sampled_out"] == 1


def test_stats_report_the_queue(make_bg, make_agent, server):
    server.configure(judge_delay_ms=500)
    judge = make_bg(max_concurrency=1)
    agent = make_agent(judge)
    for i in range(3):
        agent.run(f"q{i}")
    time.sleep(0.1)
    stats = judgehooks.stats()[judge.evaluator]
    assert stats["submitted"] == 3 and stats["in_flight"] + stats["queue_depth"] >= 2
    assert stats["oldest_pending_age_s"] is not None
    assert judgehooks.drain(30)
    stats = judge.stats()
    assert (stats["done"], stats["queue_depth"], stats["in_flight"], stats["oldest_pending_age_s"]) == (3, 0, 0, None)


# ---- crash safety, in real subprocesses ----------------------------------------------------------

PRODUCER = """
import os, sys, time
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from judgehooks import AgentAsJudgeEval, SQLiteStore
base_url, db, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
judge = AgentAsJudgeEval(name="crashy", criteria="c", model="openai/judge", api_base=base_url, api_key="k",
                         store=SQLiteStore(db), run_in_background=True, max_concurrency=4, retry_backoff=0.01)
agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="k"), post_hooks=[judge], telemetry=False)
for i in range(n):
    agent.run(f"question {i} [[judge_delay=200]]")
print("SUBMITTED", flush=True)
time.sleep(600)
"""

RESUMER = """
import os, sys
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
import judgehooks
from judgehooks import AgentAsJudgeEval, SQLiteStore
base_url, db = sys.argv[1], sys.argv[2]
judge = AgentAsJudgeEval(name="crashy", criteria="c", model="openai/judge", api_base=base_url, api_key="k",
                         store=SQLiteStore(db), run_in_background=True, max_concurrency=32, retry_backoff=0.01)
import time; time.sleep(1.0)
assert judgehooks.drain(120)
print("RESUMED", judge.stats()["resumed"], flush=True)
"""


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _produce_then_sigkill(server, tmp_path: Path, db: str, runs: int) -> None:
    """A process runs `runs` agent runs with background grading, then dies by SIGKILL."""
    producer = subprocess.Popen([sys.executable, _script(tmp_path, "producer.py", PRODUCER), server.base_url, db,
                                 str(runs)], stdout=subprocess.PIPE, text=True)
    try:
        assert producer.stdout.readline().strip() == "SUBMITTED"
        os.kill(producer.pid, signal.SIGKILL)
    finally:
        producer.wait(30)


@pytest.mark.slow
def test_sigkill_with_500_pending_then_a_new_process_resumes_exactly_once(server, tmp_path):
    db = str(tmp_path / "crash.db")
    _produce_then_sigkill(server, tmp_path, db, 500)
    graded_before = len(SQLiteStore(db).query_sync(limit=None))
    assert graded_before < 500  # most evaluations were still pending when the process died
    done = subprocess.run([sys.executable, _script(tmp_path, "resumer.py", RESUMER), server.base_url, db],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) >= 500 - graded_before - 4  # in-flight ones may be regraded
    records = SQLiteStore(db).query_sync(limit=None)
    assert len(records) == 500 and len({r.run_id for r in records}) == 500
    assert {r.input for r in records} == {f"question {i} [[judge_delay=200]]" for i in range(500)}
    assert pending(tmp_path / "crash.outbox.db") == 0


EXITER = """
import os, sys
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from judgehooks import AgentAsJudgeEval, SQLiteStore
base_url, db = sys.argv[1], sys.argv[2]
judge = AgentAsJudgeEval(criteria="c", model="openai/judge", api_base=base_url, api_key="k",
                         store=SQLiteStore(db), run_in_background=True)
agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="k"), post_hooks=[judge], telemetry=False)
for i in range(20):
    agent.run(f"q{i} [[judge_delay=300]]")
print("EXITING", flush=True)
"""


@pytest.mark.slow
def test_pending_evaluations_are_drained_at_interpreter_exit(server, tmp_path):
    db = str(tmp_path / "exit.db")
    done = subprocess.run([sys.executable, _script(tmp_path, "exiter.py", EXITER), server.base_url, db],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "EXITING" in done.stdout, done.stderr[-3000:]
    assert len(SQLiteStore(db).query_sync(limit=None)) == 20


@pytest.mark.slow
def test_judgehooks_resume_from_the_shell_grades_what_a_dead_process_left(server, tmp_path):
    db = str(tmp_path / "shell.db")
    _produce_then_sigkill(server, tmp_path, db, 50)
    env = {**os.environ, "OPENAI_API_KEY": "from-env", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "judgehooks._cli", "resume", "--store", f"sqlite:///{db}",
                           "--timeout", "120"], capture_output=True, text=True, timeout=200, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "all done" in done.stdout
    records = SQLiteStore(db).query_sync(limit=None)
    assert len(records) == 50 and len({r.run_id for r in records}) == 50
    assert all(r.evaluator == "crashy" for r in records)


def test_resume_with_nothing_pending(tmp_path):
    from judgehooks._cli import main

    assert main(["resume", "--store", str(tmp_path / "none.db")]) == 0


def test_a_bad_store_url_names_the_scheme():
    from judgehooks.stores import store_from_url

    with pytest.raises(ValueError, match="unsupported store URL scheme 'mongodb'"):
        store_from_url("mongodb://x")


def test_retry_after_is_honoured(make_judge, make_agent, store, server):
    from structlog.testing import capture_logs

    server.configure(judge_fail_next=1, judge_fail_status=429, retry_after_s=0.25)
    with capture_logs() as logs:
        make_agent(make_judge(retry_backoff=5.0)).run("q")
    [retry] = [e for e in logs if e["event"] == "judge_retry"]
    assert retry["delay_s"] == 0.25 and retry["error_type"] == "RateLimitError"
    assert store.records[0].status == "passed" and store.records[0].attempts == 2


@pytest.mark.slow
def test_a_forked_child_grades_its_own_runs(make_bg, make_agent, store, tmp_path):
    """gunicorn --preload style: the eval (and its dispatcher) exist before the fork."""
    db = str(tmp_path / "forked.db")
    judge = make_bg(store=SQLiteStore(db), name="forked")
    make_agent(judge).run("parent run")  # the parent's loop thread is running now
    pid = os.fork()
    if pid == 0:  # the child: no loop thread was inherited
        signal.alarm(60)  # never leave a hung child behind
        code = 1
        try:
            make_agent(judge).run("child run")
            code = 0 if judgehooks.drain(30) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert judgehooks.drain(30)
    assert sorted(r.input for r in SQLiteStore(db).query_sync(limit=None)) == ["child run", "parent run"]


def test_background_callbacks_run_after_the_record_is_stored(make_bg, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "ordered.db")
    seen_in_store = []

    def on_fail(record):
        seen_in_store.append([r.id for r in store.query_sync(run_id=record.run_id)] == [record.id])

    make_agent(make_bg(store=store, on_fail=on_fail)).run("q [[fail]]")
    assert judgehooks.drain(30)
    assert seen_in_store == [True]


def test_a_job_the_outbox_refuses_is_graded_from_memory_and_counted(make_bg, make_agent, store, tmp_path):
    """The outbox refusing a job (a full disk) does not lose the evaluation nor break the
    hook: it is graded from memory, stored once, and the refusal is logged and counted."""
    from structlog.testing import capture_logs

    judge = make_bg(store=store)
    agent = make_agent(judge)
    first = agent.run("q")  # the outbox file, its WAL and a journal file are open from here on
    assert judgehooks.drain(30)
    outbox = judge._shell.wiring.dispatcher.outbox
    wal = os.path.realpath(f"{outbox.path}-wal")
    [fd] = [int(n) for n in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{n}") == wal][:1]
    saved = os.dup(fd)
    full = os.open("/dev/full", os.O_WRONLY)  # the disk is full: the kernel's ENOSPC on every write
    os.dup2(full, fd)
    with outbox._lock:  # the journal's file too, and no new one can be made when the upkeep closes it
        if outbox._fd is None:
            outbox._ready()
        os.dup2(full, outbox._fd)
    os.close(full)
    blocked = [outbox._name(outbox._seq + n) for n in range(1, 400)]
    for path in blocked:
        os.mkdir(path)
    with capture_logs() as logs:
        second = agent.run("q [[fail]]")
        third = agent.run("q")
        assert judgehooks.drain(30)
        os.dup2(saved, fd)  # the disk has room again
        os.close(saved)
        for path in blocked:
            os.rmdir(path)
        with outbox._lock:
            outbox._seal()
        fourth = agent.run("q")
        assert judgehooks.drain(30)
    assert {r.run_id: r.status for r in store.records} == {first.run_id: "passed", second.run_id: "failed",
                                                           third.run_id: "passed", fourth.run_id: "passed"}
    # one warning per outage, not one per run; the rest at debug level; one line when it is over
    warned = [e for e in logs if e["event"] == "outbox_write_failed" and e["log_level"] == "warning"]
    assert [(e["run_id"], "full" in e["error"] or "I/O" in e["error"]) for e in warned] == [(second.run_id, True)]
    assert [e["run_id"] for e in logs if e["event"] == "outbox_write_failed"] == [second.run_id, third.run_id]
    assert [e["refused"] for e in logs if e["event"] == "outbox_write_recovered"] == [2]
    assert judge.stats()["outbox_failures"] == 2 and judge.stats()["done"] == 4


def test_background_with_a_dead_store_says_so_and_keeps_the_job(make_bg, make_agent, tmp_path):
    from structlog.testing import capture_logs

    (tmp_path / "dir.db").mkdir()
    judge = make_bg(store=SQLiteStore(tmp_path / "dir.db"))
    with capture_logs() as logs:
        make_agent(judge).run("q")
        assert judgehooks.drain(30)
    [event] = [e for e in logs if e["event"] == "evaluation"]
    assert event["stored"] is False and judge.stats()["store_failures"] == 1
    assert pending(tmp_path / "outbox.db") == 1  # not lost: the next process regrades it


def test_a_job_left_under_an_id_without_the_version_is_graded_once_and_leaves_the_outbox(make_bg, store, tmp_path):
    """A job a dead process left under the id its record had before record ids held the evaluator's
    version: resumed, graded and stored once, and its outbox row goes (not regraded forever)."""

    from judgehooks._base.context import EvalContext, context_to_dict
    from judgehooks._base.record import record_id
    from judgehooks._grading.outbox import Job, Outbox

    left = Outbox(tmp_path / "outbox.db")
    ctx = EvalContext(input="q", output="an answer", run_id="run-old", agent_id="a")
    left.put(Job(id=record_id("old", "run-old"), evaluator="old", context=context_to_dict(ctx)))
    left.release()  # its process is gone: the job is claimable at once
    left.close()
    judge = make_bg(name="old", store=store)
    assert judgehooks.drain(30)
    [record] = store.records
    assert (record.run_id, record.status) == ("run-old", "passed")
    assert record.id == record_id("old", "run-old", version=judge.evaluator_version) != record_id("old", "run-old")
    assert pending(tmp_path / "outbox.db") == 0


def test_an_idle_dispatcher_sleeps_until_work_comes(make_bg, make_agent, store):
    """With nothing to write the writer waits with no timer (it woke every flush_interval, 50 times a
    second per evaluator, for nothing: ~25 ms of CPU a second on an idle VM). Its batches while idle
    are counted (not timed): it starts none."""
    judge = make_bg()
    agent = make_agent(judge)
    agent.run("first")
    assert judgehooks.drain(30)
    dispatcher = judge._shell.wiring.dispatcher  # this evaluator's (earlier tests' may share its name)
    looks = [0]
    writes = dispatcher._writes
    get = writes.get

    async def counted():
        looks[0] += 1
        return await get()

    writes.get = counted  # this dispatcher's queue only: the loop is shared by every evaluator
    try:
        time.sleep(0.5)  # a window to count in (25 wake-ups before, at one per flush_interval)
    finally:
        del writes.get
    assert looks[0] <= 1, f"the idle writer woke {looks[0]} times in 0.5 s"  # ~25 before
    agent.run("second")  # the writer still wakes for work
    assert judgehooks.drain(30)
    assert sorted(r.input for r in store.records) == ["first", "second"]


def test_hand_offs_made_while_the_loop_is_busy_are_each_graded_once_after_one_wake(make_bg, make_agent, store):
    """Runs from 8 threads while the judgehooks loop is held up: every hand-off waits on the loop and
    each of the 40 is graded once, in one record. The first wakes the loop; the 39 after it find the
    wake not yet taken and join it, so the loop is woken once for all 40 (it was woken 40 times)."""
    judge = make_bg()
    agent = make_agent(judge)
    agent.run("warm")
    assert judgehooks.drain(30)
    dispatcher = judge._shell.wiring.dispatcher
    loop, wakes, take = dispatcher._loop, [], dispatcher._accept_arrived
    dispatcher._accept_arrived = lambda: (wakes.append(len(dispatcher._arrived)), take())  # this dispatcher's only
    schedule = loop.call_soon_threadsafe
    held, release = threading.Event(), threading.Event()
    schedule(lambda: (held.set(), release.wait(60)))  # the loop is busy (the judgehooks loop's thread blocks)
    assert held.wait(30)
    run_ids: list[str] = []
    lock = threading.Lock()

    def request(i: int) -> None:
        for j in range(5):
            out = make_agent(judge).run(f"request {i}.{j}")
            with lock:
                run_ids.append(out.run_id)

    try:
        threads = [threading.Thread(target=request, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not judge._shell.wiring.dispatcher.drain(0.2)  # counted on the callers' threads: 40 unfinished
    finally:
        release.set()
    assert judgehooks.drain(30)
    assert len(run_ids) == 40 and wakes == [40]  # one wake, which took the 40 jobs handed off by then
    graded = [r.run_id for r in store.records if r.input != "warm"]
    assert sorted(graded) == sorted(run_ids) and all(r.status == "passed" for r in store.records)




def test_a_hand_off_to_a_closed_loop_raises_even_behind_a_wake_it_never_ran(make_bg, make_agent):
    """A wake left on a loop that closed before running it takes no job after it: each later hand-off
    raises, as every hand-off to a closed loop did before hand-offs shared a wake, and its count is
    taken back (it had joined the dead wake silently, and drain() waited out its timeout)."""
    from judgehooks._base.context import EvalContext
    from judgehooks._grading.dispatcher import Dispatcher

    judge = make_bg()
    make_agent(judge).run("warm")
    assert judgehooks.drain(30)
    dispatcher = Dispatcher(judge._shell.wiring.dispatcher.pipeline, outbox=None)  # not registered for drain()
    loop = asyncio.new_event_loop()
    with dispatcher._lock:
        dispatcher._launch(loop)  # a loop never run: nothing it is handed is taken
    dispatcher.submit(EvalContext(input="q", output="a", run_id="first"))  # its wake waits on the loop
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        dispatcher.submit(EvalContext(input="q", output="a", run_id="second"))
    assert int(dispatcher.work) == 1 and len(dispatcher._arrived) == 1  # the first only


def test_a_wake_the_old_loop_runs_during_a_move_queues_its_jobs_where_the_new_loop_serves_them(
        make_bg, make_agent, store, monkeypatch):
    """`relocate` has quiesced the old loop, and a job handed off just then wakes it. Its wake checks
    the loop and queues under one lock, so the move waits for it, and the new loop serves the job.
    Before, the wake let go of the lock between the check and the queuing: the new loop could move
    the queue in between, and the old loop's thread then put the job into the new loop's
    `asyncio.Queue`, which is not thread-safe (a worker waiting on it is not woken)."""
    from judgehooks._base.context import EvalContext
    from judgehooks._grading import dispatcher as module

    judge = make_bg(name="moved-mid-wake")
    make_agent(judge).run("warm")
    assert judgehooks.drain(30)
    dispatcher, old = judge._shell.wiring.dispatcher, judge._shell.wiring.dispatcher._loop
    new = asyncio.new_event_loop()
    threading.Thread(target=new.run_forever, daemon=True).start()
    entered, go = threading.Event(), threading.Event()

    def held(*args):  # the old loop's wake, stopped between its check of the loop and the queuing
        entered.set()
        go.wait(10)
        return None

    asyncio.run_coroutine_threadsafe(dispatcher._quiesce(), old).result(10)  # relocate's first step
    monkeypatch.setattr(module, "overloaded", held)
    dispatcher.submit(EvalContext(input="held", output="held", run_id="held"))
    assert entered.wait(10)
    monkeypatch.undo()

    def launch():  # relocate's second step, from its own thread
        with dispatcher._lock:
            dispatcher._launch(new)

    mover = threading.Thread(target=launch)
    mover.start()
    mover.join(0.3)  # returns at once when the move does not wait for the wake
    waited = mover.is_alive()  # the move waits for the wake; had it not, it would have moved the queue by now
    go.set()
    mover.join(10)
    try:
        assert waited  # else the old loop queued the job from its thread into the new loop's queue
        assert dispatcher.drain(10), dispatcher.stats()
        assert [r.input for r in store.records if r.run_id == "held"] == ["held"]
    finally:
        asyncio.run_coroutine_threadsafe(dispatcher.relocate(old), new).result(30)
        new.call_soon_threadsafe(new.stop)


def test_jobs_left_with_contexts_or_rates_no_run_has_become_error_records_and_the_good_one_is_graded(
        make_bg, store, tmp_path):
    """Rows of `eval_jobs` a dead process could not have written: a context that is not JSON, JSON but
    not an object, an object EvalContext does not take; a sample rate that is text or outside 0..1.
    The claim raised on the first (after taking the rows), so its whole batch stayed claimed by a live
    process and was never graded, with no record. Each becomes an `error` record naming what is
    wrong, under its job's id; the good job is graded; nothing stays pending."""
    import sqlite3

    from judgehooks._base.context import EvalContext, context_to_dict
    from judgehooks._base.record import record_id
    from judgehooks._grading.outbox import Job, Outbox

    left = Outbox(tmp_path / "outbox.db")
    ctx = EvalContext(input="q", output="q", run_id="run-good", agent_id="a")
    left.put(Job(id="good", evaluator="bad-rows", context=context_to_dict(ctx)))
    bad = {"not-json": ("{nope", 1.0), "a-list": ("[1, 2]", 1.0), "unknown-key": ('{"bogus": 1}', 1.0),
           "rate-text": ("{}", "half"), "rate-negative": ("{}", -1.0), "rate-over-one": ("{}", 2.0)}
    with sqlite3.connect(tmp_path / "outbox.db") as conn:
        conn.executemany("INSERT INTO eval_jobs VALUES (?, 'bad-rows', NULL, ?, ?, 1.0, ?)",
                         [(job, context, rate, left.owner) for job, (context, rate) in bad.items()])
    left.release()  # its process is gone: the jobs are claimable at once
    left.close()
    judge = make_bg(name="bad-rows", store=store)
    assert judgehooks.drain(30)
    records = {r.id: r for r in store.records}
    good = record_id("bad-rows", "run-good", version=judge.evaluator_version)
    assert records.pop(good).status == "passed"
    assert sorted(records) == sorted(bad) and {r.status for r in records.values()} == {"error"}
    assert "not JSON" in records["not-json"].error_message
    assert "not a JSON object" in records["a-list"].error_message and "bogus" in records["unknown-key"].error_message
    assert all("sample_rate" in records[job].error_message for job in bad if job.startswith("rate"))
    assert pending(tmp_path / "outbox.db") == 0


def test_a_job_left_with_a_field_of_the_wrong_type_is_refused_unjudged_as_one_error_record(
        make_bg, store, server, tmp_path):
    """A row of `eval_jobs` whose context is a JSON object of EvalContext's keys, but a run_id that is
    a number: read back as it stood, it was judged (paid for), then its record could not be made,
    and the job stayed in the outbox to be judged and paid for again by every process that claimed
    it. `context_from_dict` refuses it by field before anything judges it: one `error` record
    naming the field, under its job's id; the judge is not called; nothing stays pending."""
    import json
    import sqlite3

    from judgehooks._grading.outbox import Job, Outbox

    left = Outbox(tmp_path / "outbox.db")
    left.put(Job(id="placeholder", evaluator="typed", context={}))  # the file and its owner row
    left.done(["placeholder"])
    context = json.dumps({"input": "q", "output": "q", "run_id": 12345, "agent_id": "a"})
    with sqlite3.connect(tmp_path / "outbox.db") as conn:
        conn.execute("INSERT INTO eval_jobs VALUES ('numeric-run-id', 'typed', NULL, ?, 1.0, 1.0, ?)",
                     (context, left.owner))
    left.release()
    left.close()
    make_bg(name="typed", store=store)
    assert judgehooks.drain(30)
    assert server.settings.counts["judge"] == 0  # never judged, never paid for
    [record] = store.records
    assert (record.id, record.status) == ("numeric-run-id", "error")
    assert "run_id" in record.error_message and "int" in record.error_message
    assert pending(tmp_path / "outbox.db") == 0


def test_a_claim_reads_no_more_than_the_byte_budget_and_no_job_past_it(make_bg, store, tmp_path):
    """A claim read every row it took whole, up to `max_queue` rows of any size: one row of a GB
    was a GB in memory (and more once parsed), in every process that started, and 10,000 rows of
    60 MiB were all read at once. A claim now reads at most `max_queue_bytes` of contexts a round;
    a job past the whole budget (which no put of this process writes) is not read: it is an `error`
    record naming its size, and the others are graded."""
    import json
    import sqlite3

    from conftest import wait_for
    from structlog.testing import capture_logs

    from judgehooks._base.context import EvalContext, context_to_dict
    from judgehooks._grading.outbox import Job, Outbox

    left = Outbox(tmp_path / "outbox.db")
    for i in range(6):
        ctx = EvalContext(input="q", output="q", run_id=f"run-{i}", agent_id="a", metadata={"pad": "x" * 1500})
        left.put(Job(id=f"job-{i}", evaluator="sized", context=context_to_dict(ctx), created_at=float(i + 2)))
    huge = json.dumps({"input": "q", "output": "q" * 50_000, "run_id": "run-huge"})
    with sqlite3.connect(tmp_path / "outbox.db") as conn:
        conn.execute("INSERT INTO eval_jobs VALUES ('huge', 'sized', NULL, ?, 1.0, 1.0, ?)", (huge, left.owner))
    left.release()
    left.close()
    with capture_logs() as logs:
        judge = make_bg(name="sized", store=store, max_queue_bytes=4000)
        wait_for(lambda: len(store.records) == 7, 30)  # a round at a time, as the budget makes room
        assert judgehooks.drain(30)
    rounds = [e["jobs"] for e in logs if e["event"] == "outbox_resumed"]
    assert sum(rounds) == 7 and max(rounds) <= 3  # about 1,700 bytes a job: two a round, and the unread one
    records = {r.id: r for r in store.records}
    huge = records.pop("huge")
    assert huge.status == "error" and "bytes" in huge.error_message and "max_queue_bytes" in huge.error_message
    assert len(records) == 6 and {r.status for r in records.values()} == {"passed"}
    assert judge.stats()["resumed"] == 7 and pending(tmp_path / "outbox.db") == 0
