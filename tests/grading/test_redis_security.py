# ruff: noqa: F811 - the Redis fixtures are shared with test_distributed.py
"""Hostile Redis: anyone who can write to the stream (a default Redis has no password; a shared one
has co-tenants) forges jobs. A forged job must never send the worker's provider key to a server of
its choosing, never stall the worker, and with a job key is refused, counted and kept. Real
redis-server, real litellm over HTTP, a real loopback HTTP server playing the attacker."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import redis
from _outbox import connect, pending
from test_distributed import (  # noqa: F401 - fixtures
    JOB_KEY,
    make_producer,
    pending_by_consumer,
    rds,
    rebuilds,
    redis_url,
    serve_until,
    signed,
)

import judgehooks
from judgehooks import Regex
from judgehooks._evaluators.spec import CONNECTION, JobRebuild
from judgehooks._grading.redis.broker import REFUSED_STREAM, STREAM
from judgehooks._grading.redis.signing import sign
from judgehooks._grading.redis.worker import Worker

WORKER_SECRET = "sk-worker-secret-never-leaves"
#: the entry size cap of the tests that set `small_cap`: 150,000-byte entries are past it
CAP = 50_000


class Attacker:
    """A loopback HTTP server that records every request (and would hand out a passing verdict)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                seen.append((self.path, dict(self.headers)))
                self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "attacker",
                                   "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                       "role": "assistant", "content": '{"passed": true, "reason": "pwned"}'}}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def attacker():
    server = Attacker()
    yield server
    server.close()


@pytest.fixture
def worker_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", WORKER_SECRET)  # what a worker's provider key looks like


@pytest.fixture
def small_cap(monkeypatch) -> int:
    """Redis entries of this test may hold CAP bytes (MAX_ENTRY_BYTES is read at every check)."""
    monkeypatch.setattr("judgehooks._grading.redis.MAX_ENTRY_BYTES", CAP)
    return CAP


def published(rds: redis.Redis) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return list(rds.xrange(STREAM))


def forge(data: bytes, **changes) -> bytes:
    """A copy of a published taskiq message with its job changed (spec keys given as spec_<key>)."""
    message = json.loads(data)
    job = json.loads(message["kwargs"]["job"])
    spec = json.loads(job["spec"]) if job.get("spec") else {}
    for key, value in changes.items():
        if key.startswith("spec_"):
            spec[key[5:]] = value
        elif key.startswith("context_"):
            job["context"][key[8:]] = value
        else:
            job[key] = value
    job["spec"] = json.dumps(spec)
    message["kwargs"]["job"] = json.dumps(job)
    return json.dumps(message).encode()


def take_the_published_job(make_producer, make_agent, rds: redis.Redis):
    """One run's job as a producer published it, taken out of the stream: (the run, the entry's data)."""
    out = make_agent(make_producer(name="dist")).run("q")
    assert judgehooks.drain(30)
    [(entry, fields)] = published(rds)
    rds.xdel(STREAM, entry)
    return out, fields[b"data"]


def test_by_default_a_forged_job_is_graded_only_by_the_workers_own_evaluator(
        make_producer, make_judge, make_agent, redis_url, rds, attacker, worker_key, server):
    out, data = take_the_published_job(make_producer, make_agent, rds)
    evil = {"spec_api_base": attacker.base_url, "spec_model": "openai/attacker"}
    rds.xadd(STREAM, {b"data": forge(data, **evil)})  # names the worker's own evaluator
    rds.xadd(STREAM, {b"data": forge(data, evaluator="forged", context_run_id="run-x", **evil)})
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=2, shutdown_timeout=5,
                    evaluators={"dist": make_judge(name="dist", retries=0)})
    asyncio.run(serve_until(worker, lambda: rds.xlen(STREAM) == 0, timeout=180))
    by_run = {r.run_id: r for r in store.records}
    assert by_run[out.run_id].status == "passed" and by_run[out.run_id].judge_model == "judge"  # the stub
    assert (by_run["run-x"].status, by_run["run-x"].error_type) == ("error", "EvaluatorUnavailable")
    assert attacker.requests == []  # no request, so no Authorization header, reached the attacker


def test_a_rebuilding_worker_never_takes_the_model_or_api_base_from_a_job(
        make_producer, make_agent, redis_url, rds, attacker, worker_key, server, signed):
    """Even a job that carries a valid signature (a tampered producer's) cannot pick the endpoint."""
    out, data = take_the_published_job(make_producer, make_agent, rds)
    data = forge(data, spec_api_base=attacker.base_url, spec_model="openai/attacker",
                 spec_litellm_kwargs={"api_base": attacker.base_url}, spec_timeout=1e9)
    rds.xadd(STREAM, {b"data": data, b"sig": sign(JOB_KEY.encode(), data)})
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=2, shutdown_timeout=5, rebuild=rebuilds(server, "AgentAsJudgeEval"))
    asyncio.run(serve_until(worker, lambda: len(store.records) == 1, timeout=180))
    [record] = store.records
    assert (record.run_id, record.status, record.judge_model) == (out.run_id, "passed", "judge")
    assert attacker.requests == [] and worker.stats()["refused"] == 0


def test_unsigned_and_mis_signed_jobs_are_refused_counted_and_kept(make_producer, make_agent, redis_url, rds,
                                                                   server, signed, worker_key):
    agent = make_agent(make_producer(name="dist"))
    outs = [agent.run("q1"), agent.run("q2")]
    assert judgehooks.drain(30)
    legit = published(rds)
    assert len(legit) == 2 and all(b"sig" in fields for _, fields in legit)
    data = legit[0][1][b"data"]
    rds.xadd(STREAM, {b"data": forge(data, context_run_id="forged-unsigned")})
    wrong = forge(data, context_run_id="forged-mis-signed")
    rds.xadd(STREAM, {b"data": wrong, b"sig": sign(b"someone-elses-key-0123456789", wrong)})
    tampered = forge(data, context_run_id="forged-tampered")  # a valid signature of other bytes
    rds.xadd(STREAM, {b"data": tampered, b"sig": legit[0][1][b"sig"]})
    rds.xadd(STREAM, {b"data": b"not a taskiq message"})
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=2, shutdown_timeout=5, rebuild=rebuilds(server, "AgentAsJudgeEval"))
    assert worker.signed_only
    asyncio.run(serve_until(worker, lambda: rds.xlen(STREAM) == 0, timeout=180))
    assert sorted(r.run_id for r in store.records) == sorted(o.run_id for o in outs)  # no forged record
    stats = worker.stats()
    assert (stats["graded"], stats["refused"]) == (2, 4)
    assert stats["refused_by_reason"] == {"unsigned": 2, "bad_signature": 2}
    kept = [fields for _, fields in rds.xrange(REFUSED_STREAM)]
    assert sorted(f[b"reason"] for f in kept) == [b"bad_signature", b"bad_signature", b"unsigned", b"unsigned"]
    assert any(b"forged-unsigned" in f[b"data"] for f in kept) and pending_by_consumer(rds) == {}


def test_a_catastrophic_regex_in_a_job_neither_stalls_the_worker_nor_takes_its_timeout_from_the_job(
        make_agent, redis_url, rds, tmp_path, signed):
    hook = dict(run_in_background=True, broker=redis_url, outbox=str(tmp_path / "producer.outbox.db"))
    agent = make_agent(Regex(r"(a|aa)+$", name="redos", **hook))
    hostile, later = agent.run("a" * 60 + "!"), agent.run("aaaa")
    assert judgehooks.drain(30)
    for entry, fields in published(rds):  # signed, and asking for an unbounded search
        rds.xdel(STREAM, entry)
        message = json.loads(fields[b"data"])
        job = json.loads(message["kwargs"]["job"])
        spec = json.loads(job["spec"])
        job["spec"] = json.dumps({**spec, "settings": {**spec["settings"], "timeout": 1e9}})
        message["kwargs"]["job"] = json.dumps(job)
        data = json.dumps(message).encode()
        rds.xadd(STREAM, {b"data": data, b"sig": sign(JOB_KEY.encode(), data)})
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=2, shutdown_timeout=5,
                    rebuild=JobRebuild(allow=frozenset({"Regex"})))
    asyncio.run(serve_until(worker, lambda: len(store.records) == 2, timeout=180))
    got = {r.run_id: r for r in store.records}
    assert (got[hostile.run_id].status, got[hostile.run_id].error_type) == ("error", "TimeoutError")
    assert "within 1s" in got[hostile.run_id].error_message  # the class default, not the job's 1e9
    assert got[later.run_id].status == "passed"  # the worker went on grading


def test_the_connection_fields_a_worker_never_takes_from_a_job_cover_every_judge_setting():
    import dataclasses

    from judgehooks._evaluators.llm import JudgeConnection

    assert {f.name for f in dataclasses.fields(JudgeConnection)} - {"include_tool_calls"} <= CONNECTION


@pytest.mark.parametrize(("env", "argv", "message"), [
    ({}, ["--rebuild", "AgentAsJudgeEval", "--judge-model", "openai/x"], "--rebuild lets a job choose"),
    ({"JUDGEHOOKS_JOB_KEY": "short"}, [], "must be at least 16 characters"),
    ({"JUDGEHOOKS_JOB_KEY": JOB_KEY}, ["--rebuild", "AgentAsJudgeEval"], "needs this worker's own judge model"),
    ({"JUDGEHOOKS_JOB_KEY": JOB_KEY}, ["--rebuild", "os.system"], "not judgehooks evaluator classes"),
    ({}, ["--rebuild", "Contains", "--imported-only"], "contradict"),
])
def test_the_worker_command_refuses_unsafe_settings_by_name(monkeypatch, capsys, env, argv, message):
    from judgehooks._cli import main

    monkeypatch.delenv("JUDGEHOOKS_JOB_KEY", raising=False)
    monkeypatch.delenv("JUDGEHOOKS_MODEL", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["worker", "--broker", "redis://127.0.0.1:1/0", "--store", "memory://", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_worker_without_a_key_says_jobs_are_not_authenticated(monkeypatch, capsys, redis_url):
    from judgehooks._cli import worker as command

    monkeypatch.delenv("JUDGEHOOKS_JOB_KEY", raising=False)
    monkeypatch.setattr(command, "_handle_signals", lambda stop, timeout, summary: (stop(), lambda: None)[1])
    from judgehooks._cli import main

    assert main(["worker", "--broker", redis_url, "--store", "memory://"]) == 0
    captured = capsys.readouterr()
    assert "jobs are NOT authenticated" in captured.err and "0 refused" in captured.out


def test_credentials_in_api_base_never_reach_the_outbox_or_a_redis_job(make_judge, make_agent, tmp_path):
    """A judge URL with user info and a token query keeps only scheme, host, port and path in what is
    stored or sent; the API key is never there at all."""

    from conftest import wait_for

    from judgehooks.testing import RedisServer

    with RedisServer() as probe:  # learn a free port, then leave it closed: the job waits in the outbox
        port = int(probe.url.rsplit(":", 1)[1].split("/")[0])
    outbox = tmp_path / "app.outbox.db"
    judge = make_judge(name="creds", api_base="http://user:hunter2@127.0.0.1:9/v1?token=tok-123#frag",
                       api_key="sk-never-stored", run_in_background=True, broker=f"redis://127.0.0.1:{port}/0",
                       outbox=str(outbox))
    make_agent(judge).run("q")
    wait_for(lambda: judge.stats()["broker_down"])
    [(spec,)] = connect(outbox).execute("SELECT spec FROM eval_jobs").fetchall()
    assert json.loads(spec)["api_base"] == "http://127.0.0.1:9/v1"
    with RedisServer(port) as back:
        assert judgehooks.drain(60)
        client = redis.Redis.from_url(back.url)
        [(_, fields)] = client.xrange(STREAM)
        client.close()
    assert b"http://127.0.0.1:9/v1" in fields[b"data"]
    for stored in (spec.encode(), fields[b"data"]):
        assert not any(s in stored for s in (b"hunter2", b"tok-123", b"user:", b"frag", b"sk-never-stored"))


def test_a_forged_entry_pushed_past_the_delivery_limit_is_refused_not_dead_lettered(
        make_producer, make_agent, redis_url, rds, server, signed, worker_key):
    """An attacker who can bump an unsigned entry's delivery count gets no record written by the
    dead-letter path: a signed worker refuses the entry whatever its count."""
    from judgehooks._grading.redis.broker import DEAD_STREAM, GROUP

    agent = make_agent(make_producer(name="dist"))
    real = agent.run("q1")
    assert judgehooks.drain(30)
    [(entry, fields)] = published(rds)
    rds.xdel(STREAM, entry)
    forged = forge(fields[b"data"], context_run_id=real.run_id)  # claims the real run: would block its verdict
    forged_id = rds.xadd(STREAM, {b"data": forged})
    rds.xreadgroup(GROUP, "attacker", {STREAM: ">"}, count=1)
    for i in range(6):  # the attacker claims it again and again: its delivery count climbs
        rds.xautoclaim(STREAM, GROUP, f"attacker-{i}", min_idle_time=0, start_id="0-0")
    rds.xadd(STREAM, {b"data": fields[b"data"], b"sig": fields[b"sig"]})  # the real job, signed
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=1, shutdown_timeout=5, max_deliveries=3,
                    rebuild=rebuilds(server, "AgentAsJudgeEval"))
    asyncio.run(serve_until(worker, lambda: rds.xlen(STREAM) == 0, timeout=180))
    [record] = store.records
    assert (record.run_id, record.status) == (real.run_id, "passed")  # the real verdict, not a forged error
    assert rds.xlen(DEAD_STREAM) == 0 and worker.broker.dead_lettered == 0
    [(_, kept)] = rds.xrange(REFUSED_STREAM)
    assert (kept[b"reason"], kept[b"entry"]) == (b"unsigned", forged_id)


@pytest.mark.parametrize("where", [REFUSED_STREAM, "judgehooks:grading:dead"])
def test_a_key_of_another_type_where_refused_or_dead_entries_go_neither_stops_the_worker_nor_loses_them(
        make_producer, make_agent, redis_url, rds, server, signed, worker_key, where):
    """Whoever writes to Redis can put a string where refused or dead-lettered entries are kept. The
    worker said WRONGTYPE and stopped, after the entry's ack and delete had run in the same MULTI as the
    failed copy: the entry was gone, kept nowhere. Now it stays pending, is named in a warning, and is
    moved once the key is a stream again; good jobs are graded meanwhile."""
    from judgehooks._grading.redis.broker import GROUP

    agent = make_agent(make_producer(name="dist"))
    real = agent.run("q1")
    assert judgehooks.drain(30)
    [(entry, fields)] = published(rds)
    rds.xdel(STREAM, entry)
    rds.set(where, "not a stream")
    junk = rds.xadd(STREAM, {b"data": b"not a taskiq message"})  # unsigned: refused
    if where != REFUSED_STREAM:  # a signed job whose deliveries someone pushed past the limit: dead-lettered
        junk = rds.xadd(STREAM, {b"data": fields[b"data"], b"sig": fields[b"sig"]})
        rds.xreadgroup(GROUP, "attacker", {STREAM: ">"}, count=2)
        rds.xclaim(STREAM, GROUP, "attacker", 0, [junk], retrycount=99)
    else:
        rds.xadd(STREAM, {b"data": fields[b"data"], b"sig": fields[b"sig"]})  # the real job
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=1, shutdown_timeout=5, max_deliveries=3,
                    rebuild=rebuilds(server, "AgentAsJudgeEval"))

    def done() -> bool:
        if store.records and rds.type(where) == b"string":
            assert rds.xrange(STREAM, junk, junk)  # still there, pending, while it cannot be kept
            rds.delete(where)
        return rds.type(where) == b"stream" and rds.xlen(STREAM) == 0

    asyncio.run(serve_until(worker, done, timeout=120))
    [(_, kept)] = rds.xrange(where)
    assert kept[b"entry"] == junk and pending_by_consumer(rds) == {}
    assert [r.run_id for r in store.records] == [real.run_id]


@pytest.mark.parametrize(("changes", "named"), [
    ({"context_run_id": 7}, "run_id"),
    ({"context_output": None}, "output"),
    ({"context_metadata": "not a mapping"}, "mapping"),
    ({"context_run_id": "\ud800"}, "surrogates"),
    ({"evaluator": ["dist"]}, "evaluator"),
])
def test_a_job_whose_fields_are_of_the_wrong_type_is_refused_once_and_never_judged(
        make_producer, make_judge, make_agent, redis_url, rds, server, changes, named):
    """Without a job key anyone may add jobs, but a malformed one must still be named and refused. A
    field of the wrong type (a run id that is a number, an output that is null, ...) raised only once
    the record was made, after the judge was paid: unacked, redelivered, paid again, and finally
    dead-lettered as 'every worker died', with no record and nothing naming the field."""
    from judgehooks._grading.redis.broker import DEAD_STREAM

    _, data = take_the_published_job(make_producer, make_agent, rds)
    rds.xadd(STREAM, {b"data": forge(data, **changes)})
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=1, shutdown_timeout=5, max_deliveries=2,
                    evaluators={"dist": make_judge(name="dist", retries=0)})
    asyncio.run(serve_until(worker, lambda: rds.xlen(STREAM) == 0, timeout=120))
    [(_, kept)] = rds.xrange(REFUSED_STREAM)
    assert kept[b"reason"] == b"bad_job" and named.encode() in kept[b"detail"]
    assert server.settings.counts["judge"] == 0 and store.records == [] and rds.xlen(DEAD_STREAM) == 0


@pytest.mark.parametrize("changes", [
    {"labels": {"ack_type": "not-a-type"}},  # taskiq raised on it before running the task: redelivered
    {"labels": {"x": "1"}, "labels_types": {"x": 99}},  # taskiq dropped it unparsed: acked, kept nowhere
    {"labels": {"timeout": "0.000001"}},  # the job choosing its own deadline
    {"args": ["an extra argument"]},
    {"kwargs_extra": 1},
])
def test_a_task_message_not_shaped_as_a_producers_is_refused_at_once_and_kept(
        make_producer, make_judge, make_agent, redis_url, rds, server, changes):
    """A producer writes `{"task_name": "judgehooks.grade", "labels": {}, "labels_types": {}, "args": [],
    "kwargs": {"job": ...}}`. Without a job key anyone may add entries; one with labels taskiq acts
    on (its own ack type, timeout or label types), positional arguments or extra keywords is refused
    as not_a_job before taskiq sees it, rather than failing every delivery into the dead letters or
    being acked unread."""
    from judgehooks._grading.redis.broker import DEAD_STREAM

    _, data = take_the_published_job(make_producer, make_agent, rds)
    message = json.loads(data)
    for key, value in changes.items():
        if key == "kwargs_extra":
            message["kwargs"]["extra"] = value
        else:
            message[key] = value
    entry = rds.xadd(STREAM, {b"data": json.dumps(message).encode()})
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=1, shutdown_timeout=5, max_deliveries=2,
                    evaluators={"dist": make_judge(name="dist", retries=0)})
    asyncio.run(serve_until(worker, lambda: rds.xlen(STREAM) == 0, timeout=120))
    [(_, kept)] = rds.xrange(REFUSED_STREAM)
    assert (kept[b"reason"], kept[b"entry"]) == (b"not_a_job", entry)
    assert server.settings.counts["judge"] == 0 and store.records == [] and rds.xlen(DEAD_STREAM) == 0


def test_a_redis_password_given_as_a_url_parameter_never_reaches_a_log_line_or_stats(make_judge, make_agent,
                                                                                      tmp_path):
    """redis-py takes `?password=` in a broker URL as well as `:password@`; both are hidden wherever
    the URL is logged or shown (the `broker_unavailable` warning, `stats()["broker"]`)."""
    from conftest import wait_for
    from structlog.testing import capture_logs

    from judgehooks.testing import RedisServer

    with RedisServer() as probe:  # a port that was free a moment ago, now closed: publishing fails and says so
        port = int(probe.url.rsplit(":", 1)[1].split("/")[0])
    judge = make_judge(name="query-password", run_in_background=True,
                       broker=f"redis://127.0.0.1:{port}/0?password=hunter2-in-the-query",
                       outbox=str(tmp_path / "app.outbox.db"))
    with capture_logs() as logs:
        make_agent(judge).run("q")
        wait_for(lambda: judge.stats()["broker_down"])
        shown = repr(judge.stats()["broker"])
        with RedisServer(port) as back:  # Redis back, with that password: the job goes out
            client = redis.Redis.from_url(back.url)
            client.config_set("requirepass", "hunter2-in-the-query")
            client.close()
            assert judgehooks.drain(60)
    shown += repr([e for e in logs if e.get("broker")])
    assert "broker_unavailable" in shown and "broker_recovered" in shown and f"127.0.0.1:{port}" in shown
    assert "hunter2-in-the-query" not in shown


def test_an_entry_past_the_size_cap_is_refused_before_its_signature_is_checked_or_it_is_decoded(
        make_producer, make_agent, redis_url, rds, server, signed, worker_key, small_cap, monkeypatch):
    """An entry past MAX_ENTRY_BYTES cost every worker that read it an HMAC and a JSON decode of its
    size, and a signed one was graded. It is refused as `too_large` first: a signed job (here also
    pushed past the delivery limit, where its dead-letter record decoded it) and unsigned bytes that
    are not JSON alike. Each refused copy keeps its first 100,000 bytes, and the job behind them is graded."""
    from taskiq.formatters.proxy_formatter import ProxyFormatter

    from judgehooks._grading.redis import broker
    from judgehooks._grading.redis.broker import DEAD_STREAM, GROUP

    real = make_agent(make_producer(name="dist")).run("q1")
    assert judgehooks.drain(30)
    [(entry, fields)] = published(rds)
    rds.xdel(STREAM, entry)
    big = forge(fields[b"data"], context_run_id="too-large", context_input="x" * 150_000)
    big_id = rds.xadd(STREAM, {b"data": big, b"sig": sign(JOB_KEY.encode(), big)})
    rds.xreadgroup(GROUP, "attacker", {STREAM: ">"}, count=1)
    for i in range(6):  # its delivery count climbs past the worker's max_deliveries
        rds.xautoclaim(STREAM, GROUP, f"attacker-{i}", min_idle_time=0, start_id="0-0")
    junk_id = rds.xadd(STREAM, {b"data": b"[" * 150_000})
    rds.xadd(STREAM, {b"data": fields[b"data"], b"sig": fields[b"sig"]})  # the real job, after them
    hashed, decoded = [], []  # the sizes of what the worker verified and decoded
    verify, loads = broker.refusal, ProxyFormatter.loads
    monkeypatch.setattr(broker, "refusal", lambda key, data, sig: hashed.append(len(data)) or verify(key, data, sig))
    monkeypatch.setattr(ProxyFormatter, "loads",
                        lambda self, message: decoded.append(len(message)) or loads(self, message))
    store = judgehooks.MemoryStore()
    worker = Worker(redis_url, store, reclaim_after=1, shutdown_timeout=5, max_deliveries=3,
                    rebuild=rebuilds(server, "AgentAsJudgeEval"))
    asyncio.run(serve_until(worker, lambda: rds.xlen(STREAM) == 0, timeout=180))
    [record] = store.records
    assert (record.run_id, record.status) == (real.run_id, "passed")
    assert worker.stats()["refused_by_reason"] == {"too_large": 2} and worker.broker.dead_lettered == 0
    assert hashed and decoded and max(hashed + decoded) < CAP  # the real job's; never a byte of the others
    kept = {fields[b"entry"]: fields for _, fields in rds.xrange(REFUSED_STREAM)}
    assert set(kept) == {big_id, junk_id} and {f[b"reason"] for f in kept.values()} == {b"too_large"}
    assert kept[big_id][b"data"] == big[:100_000] and kept[junk_id][b"data"] == b"[" * 100_000
    assert f"{len(big)} bytes, past the cap of {CAP} bytes".encode() in kept[big_id][b"detail"]
    assert rds.xlen(DEAD_STREAM) == 0 and pending_by_consumer(rds) == {}


def test_a_job_past_the_size_cap_is_never_published_and_is_one_error_record(make_producer, make_agent, rds, store,
                                                                             tmp_path, signed, small_cap):
    """Workers refuse an entry past MAX_ENTRY_BYTES, so a job that large, once published, had no
    record at all. The producer never publishes it: its run gets one `error` record naming the size,
    the cap and what to do, and the jobs around it go out as ever."""
    judge = make_producer(name="dist")
    agent = make_agent(judge)
    before, big, after = agent.run("short"), agent.run("x" * CAP), agent.run("short again")
    assert judgehooks.drain(30)
    [record] = store.records
    assert (record.run_id, record.status, record.error_type) == (big.run_id, "error", "EvaluatorError")
    assert f"past the cap of {CAP} bytes" in record.error_message and "not published" in record.error_message
    assert "redact=" in record.error_message and "without broker=" in record.error_message
    jobs = [json.loads(json.loads(fields[b"data"])["kwargs"]["job"]) for _, fields in published(rds)]
    assert [job["context"]["run_id"] for job in jobs] == [before.run_id, after.run_id]
    assert (judge.stats()["forwarded"], judge.stats()["errors"]) == (2, 1)
    assert pending(tmp_path / "producer.outbox.db") == 0  # its job is done: it has its record
