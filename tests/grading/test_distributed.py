"""Distributed grading: hooks publish to a real Redis stream (taskiq + taskiq-redis), `judgehooks worker`
processes grade into one store. Real redis-server, real agno agents, real litellm over HTTP, real SQLite."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from _outbox import pending
from conftest import wait_for

import judgehooks
from judgehooks import SQLiteStore
from judgehooks._base.record import record_id
from judgehooks._evaluators.spec import JobRebuild
from judgehooks._grading.redis.broker import GROUP, REFUSED_STREAM, STREAM
from judgehooks.testing import FakeJudge, RedisServer

JOB_KEY = "test-job-signing-key-0123456789abcdef"


def rebuilds(server, *classes: str) -> JobRebuild:
    """What `judgehooks worker --rebuild ... --judge-model openai/judge --judge-api-base <stub>` passes."""
    return JobRebuild(allow=frozenset(classes), model="openai/judge", api_base=server.base_url if server else None)


@pytest.fixture
def signed(monkeypatch) -> str:
    """Producers made in this test sign their jobs (workers started in it check them)."""
    monkeypatch.setenv("JUDGEHOOKS_JOB_KEY", JOB_KEY)
    return JOB_KEY


@pytest.fixture
def redis_url(redis_base: str) -> str:
    client = redis.Redis.from_url(redis_base)
    client.flushdb()  # each test starts with an empty stream and group
    client.close()
    return redis_base


@pytest.fixture
def rds(redis_url: str) -> redis.Redis:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def make_producer(make_judge, tmp_path, redis_url):
    def make(**kw):
        kw.setdefault("name", "dist")
        kw.setdefault("outbox", str(tmp_path / "producer.outbox.db"))
        return make_judge(run_in_background=True, broker=kw.pop("broker", redis_url), **kw)

    return make


def pending_by_consumer(rds: redis.Redis) -> dict[str, int]:
    summary = rds.xpending(STREAM, GROUP)
    return {c["name"].decode(): int(c["pending"]) for c in summary.get("consumers") or ()}


async def serve_until(worker, done: Callable[[], bool], timeout: float = 60) -> None:
    """Run an in-process Worker until `done()` holds, then stop it as SIGTERM would."""
    stop = asyncio.Event()
    task = asyncio.create_task(worker.serve(stop))
    deadline = time.monotonic() + timeout
    try:
        while not done():
            if time.monotonic() > deadline or task.done():
                failure = task.exception() if task.done() else None
                raise AssertionError(f"the worker did not finish the jobs in time: {worker.counts}") from failure
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        # Worker.serve ends within shutdown_timeout (30 s) plus the broker's 5 s; past that, fail with
        # every task's stack rather than hang until pytest-timeout.
        finished, _ = await asyncio.wait({task}, timeout=45)
        if not finished:
            raise AssertionError(f"the worker did not stop:\n{_task_stacks()}")


def _task_stacks() -> str:
    out = io.StringIO()
    for running in asyncio.all_tasks():
        running.print_stack(file=out)
    return out.getvalue()


# ---- construction and command-line errors (no Redis needed) -------------------------------------

def test_broker_must_be_a_redis_url(make_judge):
    with pytest.raises(ValueError, match=r"broker must be a Redis URL.*'http://127.0.0.1:6379'"):
        make_judge(run_in_background=True, broker="http://127.0.0.1:6379")


def test_broker_needs_background_grading(make_judge):
    with pytest.raises(ValueError, match="set run_in_background=True"):
        make_judge(broker="redis://127.0.0.1:6379/0")


@pytest.mark.parametrize(("argv", "message"), [
    (["--broker", "amqp://x"], "--broker must be a Redis URL"),
    (["--broker", "redis://127.0.0.1:1/0", "--concurrency", "0"], "--concurrency must be >= 1"),
    (["--broker", "redis://127.0.0.1:1/0", "--store", "memory://", "--import", "no_such_module_here"],
     "--import no_such_module_here: No module named 'no_such_module_here'"),
    (["--broker", "redis://127.0.0.1:1/0", "--store", "memory://", "--import", "json"],
     "--import json: the module defines no judgehooks evaluator"),
])
def test_worker_refuses_bad_arguments_by_name(argv, message, capsys):
    from judgehooks._cli import main

    assert main(["worker", *argv]) == 2
    assert message in capsys.readouterr().err


def test_worker_without_a_broker_says_how_to_give_one(capsys, monkeypatch):
    from judgehooks._cli import main

    monkeypatch.delenv("JUDGEHOOKS_BROKER", raising=False)
    assert main(["worker"]) == 2
    assert "--broker is required" in capsys.readouterr().err


# ---- in-process workers ---------------------------------------------------------------------------

def test_jobs_published_before_any_worker_exist_are_graded_once_each_despite_duplicates(
        make_producer, make_agent, rds, redis_url, server):
    from judgehooks._grading.redis.worker import Worker

    judge = make_producer()
    agent = make_agent(judge)
    outs = [agent.run(q) for q in ("plain", "bad [[fail]]", "down [[judge_status=500]]")]
    assert judgehooks.drain(30)
    assert judge.stats()["forwarded"] == 3 and rds.xlen(STREAM) == 3
    for _, fields in rds.xrange(STREAM):  # at-least-once: every job delivered twice
        rds.xadd(STREAM, fields)
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, concurrency=4, reclaim_after=2, rebuild=rebuilds(server, "AgentAsJudgeEval"))
    os.environ.setdefault("OPENAI_API_KEY", "from-env")  # specs carry no secrets
    asyncio.run(serve_until(worker, lambda: rds.xlen(STREAM) == 0))  # all six acked and deleted
    by_run = {r.run_id: r for r in store.records}
    assert len(store.records) == 3 and set(by_run) == {o.run_id for o in outs}
    assert [by_run[o.run_id].status for o in outs] == ["passed", "failed", "error"]
    assert all(r.id == record_id("dist", r.run_id, version=r.evaluator_version) and r.evaluator_version
               for r in store.records)
    assert rds.xlen(STREAM) == 0 and pending_by_consumer(rds) == {}  # acked and deleted


def test_a_replayed_signed_job_is_acked_without_paying_the_judge_again(signed, make_producer, make_agent, rds,
                                                                       redis_url, server, monkeypatch):
    """Audit 3, L5: someone who can write to Redis copies a graded, signed entry back into the stream.
    Its signature holds, but its record is stored already: a worker acks it without a judge call."""
    from judgehooks._grading.redis.worker import Worker

    monkeypatch.setenv("OPENAI_API_KEY", "from-env")  # specs carry no secrets
    agent = make_agent(make_producer())
    out = agent.run("plain")
    assert judgehooks.drain(30)
    [(_, fields)] = rds.xrange(STREAM)
    store = judgehooks.MemoryStore()
    first = Worker(redis_url, store, concurrency=4, reclaim_after=2, rebuild=rebuilds(server, "AgentAsJudgeEval"))
    assert first.signed_only
    asyncio.run(serve_until(first, lambda: rds.xlen(STREAM) == 0))
    assert server.settings.counts["judge"] == 1 and first.counts["graded"] == 1
    rds.xadd(STREAM, fields)  # the same signed entry, replayed
    second = Worker(redis_url, store, concurrency=4, reclaim_after=2, rebuild=rebuilds(server, "AgentAsJudgeEval"))
    asyncio.run(serve_until(second, lambda: rds.xlen(STREAM) == 0))
    assert server.settings.counts["judge"] == 1  # not paid again
    assert (second.counts["duplicate"], second.counts["graded"]) == (1, 0)
    assert [r.run_id for r in store.records] == [out.run_id] and pending_by_consumer(rds) == {}


def test_a_burst_of_replays_of_one_signed_job_pays_the_judge_once(signed, make_producer, make_agent, rds,
                                                                   redis_url, server, monkeypatch):
    """Audit 4, item 9: the same signed entry copied into the stream 8 times before any worker reads
    it. The store holds no record yet, so the look-up cannot stop them: the claim on the record id
    (SET NX in Redis) lets one grade, and the other 7 are acked unpaid, across two workers."""
    from judgehooks._grading.redis.worker import CLAIM_PREFIX, Worker

    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    out = make_agent(make_producer()).run("plain")
    assert judgehooks.drain(30)
    [(_, fields)] = rds.xrange(STREAM)
    for _ in range(7):
        rds.xadd(STREAM, fields)
    server.configure(judge_delay_ms=500)  # every delivery is in flight while the others are read
    store = judgehooks.MemoryStore()
    workers = [Worker(redis_url, store, concurrency=8, reclaim_after=30, consumer_name=f"w{i}",
                      rebuild=rebuilds(server, "AgentAsJudgeEval")) for i in range(2)]

    async def both() -> None:
        await asyncio.gather(*(serve_until(w, lambda: rds.xlen(STREAM) == 0) for w in workers))

    asyncio.run(both())
    assert server.settings.counts["judge"] == 1
    assert sum(w.counts["graded"] for w in workers) == 1 and sum(w.counts["duplicate"] for w in workers) == 7
    assert [r.run_id for r in store.records] == [out.run_id] and pending_by_consumer(rds) == {}
    assert rds.exists(CLAIM_PREFIX + store.records[0].id)  # held until it expires: later replays hit the store


@pytest.mark.parametrize(("custom_judge", "rebuild", "says"), [
    (True, True, "its judge is not a litellm model string"),  # a FakeJudge / agno Model cannot travel
    (False, False, "grades only those"),                # by default a worker grades only what it imports
])
def test_a_job_the_worker_may_not_grade_ends_as_an_error_record(make_producer, make_agent, redis_url, server,
                                                                 custom_judge, rebuild, says):
    from judgehooks._grading.redis.worker import Worker

    judge = make_producer(name="custom", **({"judge": FakeJudge('{"passed": true, "reason": "ok"}')}
                                            if custom_judge else {}))
    out = make_agent(judge).run("q")
    assert judgehooks.drain(30)
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=2,
                    rebuild=rebuilds(server, "AgentAsJudgeEval") if rebuild else None)
    asyncio.run(serve_until(worker, lambda: len(store.records) == 1))
    [record] = store.records
    assert (record.run_id, record.status, record.error_type) == (out.run_id, "error", "EvaluatorUnavailable")
    assert says in record.error_message and "--import" in record.error_message


def test_checks_and_user_code_evaluators_go_through_the_broker_like_the_llm_judge(
        make_agent, redis_url, tmp_path, rds):
    """Every evaluator kind takes broker=: a built-in check is rebuilt from its spec (as `judgehooks
    resume` does); an @evaluator function cannot travel, and its job ends as an error naming --import."""
    from judgehooks import Contains, evaluator
    from judgehooks._grading.redis.worker import Worker

    hook = dict(run_in_background=True, broker=redis_url, outbox=str(tmp_path / "producer.outbox.db"),
                store=judgehooks.MemoryStore())
    check = Contains("ECHO: yes", name="says-yes", **hook)
    words = evaluator(lambda ctx: len(ctx.output.split()) < 50, name="short", **hook)
    assert check.stats()["broker"] == redis_url and words.stats()["broker"] == redis_url
    agent = make_agent(check, words)
    outs = [agent.run("yes"), agent.run("no")]
    assert judgehooks.drain(30)
    assert rds.xlen(STREAM) == 4 and check.store.records == []  # producers never grade
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=2, rebuild=rebuilds(None, "Contains"))
    asyncio.run(serve_until(worker, lambda: len(store.records) == 4))
    got = {(r.evaluator, r.run_id): r for r in store.records}
    assert [got["says-yes", o.run_id].status for o in outs] == ["passed", "failed"]
    for out in outs:
        record = got["short", out.run_id]
        assert (record.status, record.error_type) == ("error", "EvaluatorUnavailable")
        assert "'short' cannot be rebuilt" in record.error_message and "--import" in record.error_message
    assert worker.counts == {"graded": 4, "unavailable": 2, "store_failed": 0, "duplicate": 0}
    assert worker.stats()["refused"] == 0


def test_a_job_with_settings_that_cannot_be_built_ends_as_an_error_record_and_junk_is_refused(
        make_producer, make_agent, redis_url, rds, server):
    import json

    from judgehooks._grading.redis.worker import Worker

    out = make_agent(make_producer(name="tampered")).run("q")
    assert judgehooks.drain(30)
    [(entry_id, fields)] = rds.xrange(STREAM)
    message = json.loads(fields[b"data"])
    job = json.loads(message["kwargs"]["job"])
    job["spec"] = json.dumps({**json.loads(job["spec"]), "scoring_strategy": "numeric", "threshold": 99})
    message["kwargs"]["job"] = json.dumps(job)
    rds.xdel(STREAM, entry_id)
    rds.xadd(STREAM, {b"data": json.dumps(message).encode()})
    rds.xadd(STREAM, {b"data": b"not a taskiq message"})
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=2, rebuild=rebuilds(server, "AgentAsJudgeEval"))
    asyncio.run(serve_until(worker, lambda: rds.xlen(STREAM) == 0))
    [record] = store.records
    assert (record.run_id, record.status, record.error_type) == (out.run_id, "error", "EvaluatorUnavailable")
    assert "threshold must be between 1 and 10" in record.error_message
    assert pending_by_consumer(rds) == {}  # the junk was acked too, into the refused stream
    [(_, refused)] = rds.xrange(REFUSED_STREAM)
    assert (refused[b"reason"], refused[b"data"]) == (b"not_a_job", b"not a taskiq message")
    assert worker.stats()["refused_by_reason"] == {"not_a_job": 1}


def test_a_worker_that_cannot_reach_redis_says_so(capsys):
    from judgehooks._cli import main

    with RedisServer() as probe:  # a port that was free a moment ago, now closed
        closed = probe.url
    assert main(["worker", "--broker", closed, "--store", "memory://"]) == 1
    captured = capsys.readouterr()
    assert f"cannot reach Redis at {closed}" in captured.err and "grading from" not in captured.out


IMPORTED = """
import os
from judgehooks import AgentAsJudgeEval, MemoryStore
from judgehooks.testing import FakeJudge
FAILED = []
judge = AgentAsJudgeEval(name="imported", criteria="c", judge=FakeJudge('{"passed": false, "reason": "no"}'),
                         store=MemoryStore(), on_fail=FAILED.append, run_in_background=True,
                         broker=os.environ["DIST_TEST_BROKER"], outbox=os.environ["DIST_TEST_OUTBOX"])
"""


def test_imported_evaluators_grade_with_their_own_judge_and_callbacks(make_agent, redis_url, tmp_path, monkeypatch):
    from judgehooks._cli.worker import _imported_evaluators
    from judgehooks._grading.redis.worker import Worker

    (tmp_path / "dist_app_evals.py").write_text(IMPORTED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("DIST_TEST_BROKER", redis_url)
    monkeypatch.setenv("DIST_TEST_OUTBOX", str(tmp_path / "app.outbox.db"))
    evaluators = _imported_evaluators(["dist_app_evals"])
    app = sys.modules["dist_app_evals"]
    assert list(evaluators) == ["imported"]
    out = make_agent(app.judge).run("q")
    assert judgehooks.drain(30)
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, evaluators=evaluators, reclaim_after=2)
    asyncio.run(serve_until(worker, lambda: len(app.FAILED) == 1))
    assert [(r.run_id, r.status) for r in store.records] == [(out.run_id, "failed")]
    assert app.FAILED[0].run_id == out.run_id
    assert app.judge.store.records == []  # the worker writes to its own --store


def test_with_redis_down_jobs_wait_in_the_outbox_and_go_out_when_it_is_back(make_producer, make_agent, tmp_path):
    with RedisServer() as probe:  # learn a free port, then leave it closed
        port = int(probe.url.rsplit(":", 1)[1].split("/")[0])
    judge = make_producer(broker=f"redis://127.0.0.1:{port}/0")
    agent = make_agent(judge)
    run_ids = [agent.run(f"q{i}").run_id for i in range(5)]
    wait_for(lambda: judge.stats()["broker_down"])
    assert pending(tmp_path / "producer.outbox.db") == 5
    assert judge.stats()["forwarded"] == 0 and judge.stats()["dropped"] == 0
    with RedisServer(port) as back:
        assert judgehooks.drain(60)
        assert judge.stats()["forwarded"] == 5 and not judge.stats()["broker_down"]
        assert pending(tmp_path / "producer.outbox.db") == 0
        client = redis.Redis.from_url(back.url)
        published = [e for _, e in client.xrange(STREAM)]
        client.close()
    assert sorted(run_ids) == sorted(r for r in run_ids if any(r.encode() in e[b"data"] for e in published))
    assert len(published) == 5


def test_a_redis_outage_after_the_first_job_holds_the_next_ones_until_it_is_back(make_producer, make_agent, tmp_path):
    """taskiq's `kiq` wrapped Redis's connection error in its own `SendTaskError`, which the retry did
    not catch: a job published once Redis had gone away (after the first) crashed its step and stayed
    in the outbox for the next process, while `drain()` said all was done."""
    with RedisServer() as first:
        port = int(first.url.rsplit(":", 1)[1].split("/")[0])
        judge = make_producer(broker=first.url)
        agent = make_agent(judge)
        agent.run("q0")
        assert judgehooks.drain(30) and judge.stats()["forwarded"] == 1
    later = agent.run("q1").run_id
    wait_for(lambda: judge.stats()["broker_down"])
    with RedisServer(port) as back:
        assert judgehooks.drain(60)
        client = redis.Redis.from_url(back.url)
        [(_, fields)] = client.xrange(STREAM)
        client.close()
    assert later.encode() in fields[b"data"] and judge.stats()["forwarded"] == 2
    assert pending(tmp_path / "producer.outbox.db") == 0


def test_forwarding_follows_the_dispatcher_onto_the_apps_loop_and_back(make_producer, make_agent, rds):
    agent = make_agent(make_producer())
    runs = [agent.run("before lifespan").run_id]  # forwarded from judgehooks' loop

    async def app() -> None:
        async with judgehooks.lifespan(drain_timeout=30):  # forwarding moves to this loop
            runs.append((await agent.arun("inside lifespan")).run_id)

    asyncio.run(app())
    runs.append(agent.run("after lifespan").run_id)  # and back: Redis connections are per loop
    assert judgehooks.drain(30)
    published = b"".join(fields[b"data"] for _, fields in rds.xrange(STREAM))
    assert rds.xlen(STREAM) == 3 and all(run.encode() in published for run in runs)


# ---- worker processes -----------------------------------------------------------------------------

def start_worker(redis_url: str, db: str, name: str, tmp_path: Path, server, *extra: str) -> subprocess.Popen:
    """A `judgehooks worker` process that checks signatures and rebuilds AgentAsJudgeEval with the stub judge."""
    env = {**os.environ, "OPENAI_API_KEY": "from-env", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "JUDGEHOOKS_JOB_KEY": JOB_KEY}
    proc = subprocess.Popen(
        [sys.executable, "-m", "judgehooks._cli", "worker", "--broker", redis_url, "--store", f"sqlite:///{db}",
         "--name", name, "--concurrency", "4", "--reclaim-after", "2", "--rebuild", "AgentAsJudgeEval",
         "--judge-model", "openai/judge", "--judge-api-base", server.base_url, *extra],
        stdout=subprocess.PIPE, stderr=open(tmp_path / f"{name}.err", "w"), text=True, env=env)
    line = proc.stdout.readline()
    assert "grading from" in line, (line, (tmp_path / f"{name}.err").read_text()[-3000:])
    proc.err_path = tmp_path / f"{name}.err"  # type: ignore[attr-defined]  # for stop_worker's report
    return proc


def stop_worker(proc: subprocess.Popen) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out = proc.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        # Say which it is: the worker still running (then SIGUSR1 has it dump every thread's stack
        # to its stderr), or gone while something it started still holds its stdout open.
        running = proc.poll() is None
        if running:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(2)
        proc.kill()
        try:
            out = proc.communicate(timeout=5)[0]
        except subprocess.TimeoutExpired:
            out = "(stdout still held open by another process)"
        err = Path(proc.err_path).read_text()[-8000:] if hasattr(proc, "err_path") else ""
        raise AssertionError(f"the worker {'was still running' if running else 'had exited'} 60 s after its "
                             f"SIGTERM\nstdout: {out[-2000:]}\nstderr: {err}") from None
    return proc.returncode, out


@pytest.mark.slow
def test_sigkill_one_of_two_workers_mid_job_and_every_run_has_exactly_one_record(
        make_producer, make_agent, redis_url, rds, tmp_path, server, signed):
    db = str(tmp_path / "shared.db")
    a = start_worker(redis_url, db, "worker-a", tmp_path, server)
    b = start_worker(redis_url, db, "worker-b", tmp_path, server)
    try:
        agent = make_agent(make_producer())
        run_ids = [agent.run(f"question {i} [[judge_delay=400]]").run_id for i in range(40)]
        wait_for(lambda: pending_by_consumer(rds).get("worker-a", 0) > 0, timeout=30)
        os.kill(a.pid, signal.SIGKILL)  # mid-job: it holds delivered, unacked jobs
        a.wait(30)
        held_by_dead = pending_by_consumer(rds).get("worker-a", 0)
        assert held_by_dead > 0
        assert judgehooks.drain(30)  # the producer is done: from here on the stream gets no traffic
        store = SQLiteStore(db)
        wait_for(lambda: len(store.query_sync(limit=None)) >= 40, timeout=90)
        time.sleep(0.5)  # a duplicate write, had there been one, would land now
        records = store.query_sync(limit=None)
        assert sorted(r.run_id for r in records) == sorted(run_ids)  # one record per run, none missing
        assert all(r.status == "passed" and r.id == record_id("dist", r.run_id, version=r.evaluator_version)
                   for r in records)
        wait_for(lambda: pending_by_consumer(rds).get("worker-a", 0) == 0, timeout=30)
    finally:
        if a.poll() is None:
            a.kill()
        code, out = stop_worker(b)
    assert code == 0 and "stopped;" in out, (out, (tmp_path / "worker-b.err").read_text()[-3000:])
    reclaimed = int(out.split(" reclaimed")[0].rsplit(", ", 1)[1])
    assert ", 0 refused" in out
    assert reclaimed >= held_by_dead  # taken back while the stream was idle, on the timer


@pytest.mark.slow
def test_sigterm_finishes_running_jobs_within_the_deadline_and_leaves_the_rest_unacked(
        make_producer, make_agent, redis_url, rds, tmp_path, server, signed):
    db = str(tmp_path / "term.db")
    worker = start_worker(redis_url, db, "worker-t", tmp_path, server, "--shutdown-timeout", "8")
    try:
        agent = make_agent(make_producer())
        quick = agent.run("quick [[judge_delay=2500]]").run_id
        slow = agent.run("slow [[judge_delay=60000]]").run_id
        assert judgehooks.drain(30)
        wait_for(lambda: pending_by_consumer(rds).get("worker-t", 0) == 2, timeout=30)
        code, out = stop_worker(worker)  # one SIGTERM
    finally:
        if worker.poll() is None:
            worker.kill()
    assert code == 0 and "stopped; 1 graded" in out, out
    assert [r.run_id for r in SQLiteStore(db).query_sync(limit=None)] == [quick]
    [[entry_id, _]] = rds.xrange(STREAM)
    assert pending_by_consumer(rds) == {"worker-t": 1}  # the slow job waits, unacked, for another worker
    assert slow.encode() in rds.xrange(STREAM)[0][1][b"data"] and entry_id


def test_a_job_that_every_worker_dies_on_goes_to_the_dead_letter_stream_with_an_error_record(
        make_producer, make_agent, redis_url, rds, monkeypatch, server):
    from judgehooks._grading.redis.broker import DEAD_STREAM
    from judgehooks._grading.redis.worker import Worker

    agent = make_agent(make_producer())
    doomed = agent.run("the job that kills its workers").run_id
    assert judgehooks.drain(30)
    # Three workers took it and died before acking (what a crash leaves: the entry pending, its count up).
    [[_, [(entry, _)]]] = rds.xreadgroup(GROUP, "crashed-0", {STREAM: ">"}, count=1)
    for i in (1, 2):
        rds.xautoclaim(STREAM, GROUP, f"crashed-{i}", min_idle_time=0, start_id="0-0")
    survivor = agent.run("a job published after it").run_id
    assert judgehooks.drain(30)
    store = judgehooks.MemoryStore()
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")  # specs carry no secrets
    worker = Worker(redis_url, store, reclaim_after=1, rebuild=rebuilds(server, "AgentAsJudgeEval"), max_deliveries=3)
    # the dead letter's copy goes before its ack (so a copy that fails loses nothing): wait for the whole move
    asyncio.run(serve_until(worker, lambda: len(store.records) == 2 and worker.broker.dead_lettered == 1))
    by_run = {r.run_id: r for r in store.records}
    assert by_run[survivor].status == "passed"
    dead = by_run[doomed]
    assert (dead.status, dead.error_type) == ("error", "EvaluatorError")
    assert "delivered 4 times and no worker finished it" in dead.error_message and DEAD_STREAM in dead.error_message
    [(_, fields)] = rds.xrange(DEAD_STREAM)
    assert (fields[b"entry"], fields[b"deliveries"]) == (entry, b"4")
    assert worker.broker.dead_lettered == 1 and rds.xlen(STREAM) == 0 and pending_by_consumer(rds) == {}


class DownAtFirst(judgehooks.MemoryStore):
    """A store that refuses its first writes (more than one delivery's write retries), then takes them."""

    failures = 6

    async def write(self, records):
        if self.failures:
            self.failures -= 1
            raise ConnectionError("store down")
        await super().write(records)


def test_a_dead_letter_is_acked_only_once_its_error_record_is_stored(make_producer, make_agent, redis_url, rds,
                                                                     server):
    """A store that is down while a job is buried leaves the job pending; a later reclaim stores its
    record and only then moves it to the dead-letter stream: nothing is lost."""
    from judgehooks._grading.redis.broker import DEAD_STREAM
    from judgehooks._grading.redis.worker import Worker

    doomed = make_agent(make_producer()).run("the job that kills its workers").run_id
    assert judgehooks.drain(30)
    rds.xreadgroup(GROUP, "crashed-0", {STREAM: ">"}, count=1)
    for i in (1, 2, 3):
        rds.xautoclaim(STREAM, GROUP, f"crashed-{i}", min_idle_time=0, start_id="0-0")
    store = DownAtFirst()
    worker = Worker(redis_url, store, reclaim_after=1, rebuild=rebuilds(server, "AgentAsJudgeEval"), max_deliveries=3)
    asyncio.run(serve_until(worker, lambda: rds.xlen(DEAD_STREAM) == 1 and rds.xlen(STREAM) == 0, timeout=120))
    [record] = store.records
    assert (record.run_id, record.status, record.error_type) == (doomed, "error", "EvaluatorError")
    # a store down past max_deliveries x reclaim_after buries good jobs too: the record says it may have been that
    assert "no worker finished it (each died, stopped or could not store its record)" in record.error_message
    assert store.failures == 0 and rds.xlen(STREAM) == 0 and pending_by_consumer(rds) == {}
