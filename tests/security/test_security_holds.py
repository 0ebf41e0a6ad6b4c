"""Security properties that already held before the hostile-input audit (issue 12), each pinned by a
test named after it: secrets never leave, untrusted text is fenced, filters are bound, JSONL lines
stay whole, odd runs give one record each, out-of-range scores are errors, webhooks stay on the
URL they were given with valid TLS and bounded retries, and two processes sharing one store lose
and duplicate nothing."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import ssl
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _outbox import pending
from _runner import CliResult, run_cli
from agno.media import Image
from agno.run.agent import RunOutput
from agno.run.base import RunStatus
from pydantic import BaseModel
from structlog.testing import capture_logs

import judgehooks
from judgehooks import EvalContext, EvalRecord, JsonlStore, MemoryStore, SQLiteStore, ToolCall, WebhookNotifier
from judgehooks._judges.prompt import build_request
from judgehooks.testing import WebhookReceiver

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
API_KEY = "sk-live-" + uuid.uuid4().hex  # unique: any occurrence anywhere is a leak
TOKEN = "T0KEN" + uuid.uuid4().hex


def cli(*args: str) -> CliResult:
    return run_cli(*args)


def every_byte_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


# ---- secrets ---------------------------------------------------------------------------------------

def test_no_key_or_webhook_token_appears_in_any_record_file_log_line_or_cli_output(
        make_judge, make_agent, tmp_path):
    db, lines = tmp_path / "evals.db", tmp_path / "evals.jsonl"
    sqlite_store = SQLiteStore(db)
    hook = WebhookNotifier(f"http://127.0.0.1:9/services/{TOKEN}", retries=0)  # nothing listens: it fails, logged
    inline = make_judge(name="inline", api_key=API_KEY, store=sqlite_store, on_fail=hook, on_error=hook,
                        file_path_to_save_results=str(tmp_path / "results" / "{name}.json"))
    background = make_judge(name="background", api_key=API_KEY, store=JsonlStore(str(lines)), run_in_background=True,
                            outbox=str(tmp_path / "outbox.db"), on_fail=hook)
    agent = make_agent(inline, background)
    with capture_logs() as logs:
        agent.run(f"my key is not {API_KEY[:6]}... [[fail]]")
        agent.run("q [[judge_status=401]]")
        inline.run(input="q", output="a")
        assert judgehooks.drain(30)
    assert len(sqlite_store.query_sync(limit=None)) == 3 and len(lines.read_text().splitlines()) == 2
    sqlite_store.close()
    outputs = [cli("report", "--store", str(db), "--since", "all", *extra).stdout + "" for extra in ([], ["--json"])]
    outputs += [cli("tail", "--store", str(store), "--no-follow", "--json").stdout for store in (db, lines)]
    assert any("inline" in out for out in outputs)
    for secret in (API_KEY, TOKEN):
        assert secret.encode() not in every_byte_under(tmp_path)  # stores, WAL, outbox, JSONL, results file
        assert secret not in json.dumps(logs, default=str)
        assert not any(secret in out for out in outputs)
    assert any(e["event"] == "notify_failed" for e in logs)  # the token's URL was logged: host only


def test_no_key_appears_in_a_redis_job(make_judge, make_agent, tmp_path, redis_base):
    import redis

    client = redis.Redis.from_url(redis_base)
    client.flushdb()
    judge = make_judge(name="dist", api_key=API_KEY, run_in_background=True, broker=redis_base,
                       outbox=str(tmp_path / "outbox.db"))
    make_agent(judge).run("q")
    assert judgehooks.drain(30)
    jobs = [fields[b"data"] for _, fields in client.xrange("judgehooks:grading")]
    client.close()
    assert len(jobs) == 1 and API_KEY.encode() not in jobs[0] and b"openai/judge" in jobs[0]


# ---- prompt fencing ------------------------------------------------------------------------------------

def test_a_fresh_nonce_fences_every_untrusted_field():
    fields = {"INPUT": "in-7f3", "OUTPUT": "out-9a1", "EXPECTED-OUTPUT": "exp-c22", "TOOL-CALLS": "tool-5d0",
              "GIVEN-CONTEXT": "ctx-e41"}
    ctx = EvalContext(input=fields["INPUT"], output=fields["OUTPUT"], expected=fields["EXPECTED-OUTPUT"],
                      tool_calls=(ToolCall(name="search", arguments={"q": fields["TOOL-CALLS"]}, result="r"),))
    requests = [build_request(ctx, criteria="c", mode="binary", include_tools=True,
                              context=fields["GIVEN-CONTEXT"]) for _ in range(2)]
    assert requests[0].nonce != requests[1].nonce and len(requests[0].nonce) >= 16
    for request in requests:
        system, user = request.messages[0]["content"], request.messages[1]["content"]
        for label, marker in fields.items():
            start, end = f"<<<{label}-{request.nonce}>>>", f"<<<END-{label}-{request.nonce}>>>"
            assert user.index(start) < user.index(marker) < user.index(end), label
            assert marker not in system and user.count(marker) == 1


# ---- SQL filters -----------------------------------------------------------------------------------

INJECTIONS = ["x' OR '1'='1", "x\" OR \"1\"=\"1", "'; DROP TABLE eval_records; --", "%", "_", "a' UNION SELECT * --"]


@pytest.mark.parametrize("flag", ["--agent-id", "--team-id", "--evaluator"])
def test_every_cli_filter_is_a_bound_parameter(tmp_path, flag, capsys):
    from judgehooks._cli import main

    db = tmp_path / "evals.db"
    store = SQLiteStore(db)
    asyncio.run(store.write([EvalRecord(id=str(uuid.uuid4()), status="passed", evaluator="e", mode="binary",
                                        agent_id="a", team_id="t", run_id=f"r{i}") for i in range(3)]))
    store.close()
    for value in INJECTIONS:
        assert main(["tail", "--store", str(db), "--no-follow", "--json", flag, value]) == 0
        assert capsys.readouterr().out == ""  # matched nothing
        assert main(["report", "--store", str(db), "--since", "all", "--json", flag, value]) == 0
        assert json.loads(capsys.readouterr().out)["total"]["count"] == 0, value
    assert main(["tail", "--store", str(db), "--no-follow", "--json", flag, {"--agent-id": "a", "--team-id": "t",
                                                                            "--evaluator": "e"}[flag]]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3  # the filter does work
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM eval_records").fetchone() == (3,)  # and dropped nothing
    conn.close()


# ---- JSONL lines --------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_jsonl_control_characters_stay_one_record_per_line(tmp_path):
    nasty = "a\nb\rc\u2028d\u2029e\x85f\x1cg\x1dh\x1ei\x00j\x0bk\x0cl"
    store = JsonlStore(str(tmp_path / "evals.jsonl"))
    records = [EvalRecord(id=f"id-{i}", status="failed", evaluator="e", mode="binary", reason=nasty, output=nasty,
                          metadata={"k": nasty}) for i in range(3)]
    await store.write(records)
    raw = (tmp_path / "evals.jsonl").read_bytes()
    assert raw.count(b"\n") == 3 and all(json.loads(line)["reason"] == nasty for line in raw.splitlines())
    assert sorted(r.id for r in await store.query(limit=None)) == ["id-0", "id-1", "id-2"]


# ---- odd hook inputs -------------------------------------------------------------------------------

class Answer(BaseModel):
    city: str
    population: int


def odd_runs() -> dict[str, RunOutput]:
    def run(**fields: Any) -> RunOutput:
        return RunOutput(run_id=str(uuid.uuid4()), agent_id="odd", session_id="s", **fields)

    return {
        "None": run(content=None),
        "10 MB": run(content="x" * 10_000_000),
        "bytes": run(content=b"\x00\xffraw bytes"),
        "media": run(content="see image", images=[Image(url="https://example.com/cat.png")]),
        "pydantic": run(content=Answer(city="Paris", population=2_100_000)),
        "errored": run(content="partial", status=RunStatus.error),
        "cancelled": run(content=None, status=RunStatus.cancelled),
    }


@pytest.mark.parametrize("kind", list(odd_runs()))
def test_odd_hook_inputs_each_give_exactly_one_record(make_judge, kind):
    store = MemoryStore()
    judge = make_judge(store=store, timeout=30)
    run_output = odd_runs()[kind]
    judge.post_check(run_output=run_output)
    assert [r.run_id for r in store.records] == [run_output.run_id]
    assert store.records[0].status in ("passed", "failed", "error", "skipped")


# ---- out-of-range scores ---------------------------------------------------------------------------

@pytest.mark.parametrize("score", [0, 11, -3, 1000])
def test_out_of_range_scores_are_error_records(make_judge, make_agent, store, score):
    failed: list[EvalRecord] = []
    agent = make_agent(make_judge(scoring_strategy="numeric", threshold=7, retries=0, on_fail=failed.append))
    out = agent.run(f"q [[score={score}]]")
    [record] = store.records
    assert (record.run_id, record.status, record.passed, record.score) == (out.run_id, "error", None, None)
    assert failed == []


# ---- webhooks ------------------------------------------------------------------------------------------

class _Redirecting:
    """A loopback server answering every POST with 307 to `target`."""

    def __init__(self, target: str, tls: ssl.SSLContext | None = None) -> None:
        outer = self
        self.attempts = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.attempts += 1
                self.send_response(307 if target else 200)
                if target:
                    self.send_header("location", target)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_webhooks_do_not_follow_redirects(make_judge, make_agent):
    with WebhookReceiver() as elsewhere:
        redirecting = _Redirecting(elsewhere.url)
        try:
            notifier = WebhookNotifier(f"http://127.0.0.1:{redirecting.port}/hook", retries=2, backoff=0.01)
            make_agent(make_judge(on_fail=notifier)).run("q [[fail]]")
            assert judgehooks.drain(30)
        finally:
            redirecting.stop()
        assert elsewhere.attempts == 0 and redirecting.attempts == 1  # a 3xx is neither followed nor retried
    assert notifier.stats()["failed"] == 1


def test_webhooks_refuse_a_certificate_they_cannot_verify(make_judge, make_agent, tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a self-signed certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server = _Redirecting("", tls=tls)
    try:
        notifier = WebhookNotifier(f"https://127.0.0.1:{server.port}/hook", retries=0)
        with capture_logs() as logs:
            make_agent(make_judge(on_fail=notifier)).run("q [[fail]]")
            assert judgehooks.drain(30)
    finally:
        server.stop()
    assert server.attempts == 0 and notifier.stats()["failed"] == 1  # no POST got through the handshake
    (failed,) = [e for e in logs if e["event"] == "notify_failed"]
    assert "CERTIFICATE_VERIFY_FAILED" in failed["error"]


def test_webhook_retries_are_bounded(make_judge, make_agent):
    with WebhookReceiver(status=503) as down:
        notifier = WebhookNotifier(down.url, retries=3, backoff=0.01)
        make_agent(make_judge(on_fail=notifier)).run("q [[fail]]")
        assert judgehooks.drain(30)
        assert down.attempts == 4 and notifier.stats() == {"sent": 0, "failed": 1, "dropped": 0, "pending": 0}


# ---- two processes, one store and one outbox -----------------------------------------------------------

PRODUCER = """
import sys
from agno.agent import Agent
from agno.models.openai.like import OpenAILike
import judgehooks
from judgehooks import AgentAsJudgeEval, SQLiteStore
base, db, outbox, tag = sys.argv[1:5]
judge = AgentAsJudgeEval(name="shared", criteria="c", model="openai/judge", api_base=base, api_key="k", retries=2,
                         timeout=60, store=SQLiteStore(db), outbox=outbox, run_in_background=True)
agent = Agent(model=OpenAILike(id="agent", base_url=base, api_key="k"), post_hooks=[judge], telemetry=False)
ids = [agent.run(f"{tag} question {i}").run_id for i in range(40)]
assert judgehooks.drain(120)
print("\\n".join(ids))
"""


@pytest.mark.slow
def test_two_processes_sharing_one_store_and_outbox_lose_and_duplicate_nothing(server, tmp_path):
    db, outbox = str(tmp_path / "shared.db"), str(tmp_path / "shared.outbox.db")
    procs = [subprocess.Popen([sys.executable, "-c", PRODUCER, server.base_url, db, outbox, tag],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV) for tag in "ab"]
    results = [proc.communicate(timeout=300) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), [err[-2000:] for _, err in results]
    run_ids = sorted(line for out, _ in results for line in out.split())
    records = SQLiteStore(db).query_sync(limit=None)
    assert len(run_ids) == 80 and sorted(r.run_id for r in records) == run_ids  # none lost, none twice
    assert len({r.id for r in records}) == 80
    assert pending(outbox) == 0  # every job finished and removed
