"""A misconfigured judge speaks: the first judge error of each kind an evaluator meets is logged as
one warning naming the model, the judge's URL (without credentials) and the timeout; every
evaluation still ends as one error record (never a failure), and a timeout's or connection
error's record names the URL and the timeout too. Both judge kinds, one path (`JudgeCall.ask`)."""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from agno.models.openai import OpenAIChat

from judgehooks import AgentAsJudgeEval, MemoryStore
from judgehooks.testing import StubLLMServer

SECRET = "topsecret"
TIMEOUT = 0.5  # for the endpoint that never answers; the others get a timeout a loaded machine cannot reach


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def hanging_port() -> Iterator[int]:
    """A loopback server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    listener.close()
    for conn in held:
        conn.close()
    thread.join(5)


def with_credentials(judge: str, port: int) -> str:
    """The judge's URL with a secret in its query (as some gateways take their key) and, for the agno
    model's client (httpx), in its user info too: litellm's aiohttp client refuses user info beside
    the key's Authorization header."""
    userinfo = f"judge-user:{SECRET}@" if judge == "agno" else ""
    return f"http://{userinfo}127.0.0.1:{port}/v1?api-key={SECRET}"


def make_evaluator(kind: str, url: str, *, key: bool, timeout: float = 30.0) -> AgentAsJudgeEval:
    common: dict[str, Any] = {"criteria": "c", "store": MemoryStore(), "retries": 1, "retry_backoff": 0.01,
                              "timeout": timeout}
    if kind == "litellm":
        return AgentAsJudgeEval(model="openai/judge", api_base=url, **({"api_key": "k"} if key else {}), **common)
    model = OpenAIChat(id="judge", base_url=url, max_retries=0, **({"api_key": "k"} if key else {}))
    return AgentAsJudgeEval(model=model, **common)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "judgehooks" and r.levelno == logging.WARNING and "judge_error" in r.getMessage()]


def kinds(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [re.search(r"kind='([^']*)'", w).group(1) for w in warnings(caplog)]  # type: ignore[union-attr]


@pytest.mark.parametrize("judge", ["litellm", "agno"])
@pytest.mark.parametrize("problem", ["missing_key", "unreachable", "hanging"])
def test_a_misconfigured_judge_warns_once_and_every_evaluation_is_an_error_record(
        judge, problem, hanging_port, caplog, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    caplog.set_level(logging.WARNING, logger="judgehooks")
    port = hanging_port if problem == "hanging" else closed_port()
    timeout = TIMEOUT if problem == "hanging" else 30.0
    evaluator = make_evaluator(judge, with_credentials(judge, port), key=problem != "missing_key", timeout=timeout)
    clean = f"http://127.0.0.1:{port}/v1"
    first = evaluator.run(cases=[{"input": f"q{i}", "output": f"a{i}"} for i in range(3)])
    again = evaluator.run(input="q", output="a")  # a later run: the same kind is not warned again
    records = [*first.results, *again.results]
    assert [r.status for r in records] == ["error"] * 4 and not any(r.passed is False for r in records)
    [warning] = warnings(caplog)
    kind = {"missing_key": "auth", "unreachable": "connection", "hanging": "timeout"}[problem]
    assert f"kind='{kind}'" in warning and f"url='{clean}'" in warning and f"timeout_s={timeout}" in warning
    assert f"model='{evaluator.judge.model}'" in warning
    assert SECRET not in warning and not any(SECRET in (r.error_message or "") for r in records)
    if problem != "missing_key":
        assert all(clean in r.error_message and f"{timeout:g} s" in r.error_message for r in records), \
            records[0].error_message
        assert records[0].error_type != "JudgeUnavailable"  # the original's type name, as before


def test_another_kind_of_error_warns_again_once(server, caplog):
    caplog.set_level(logging.WARNING, logger="judgehooks")
    evaluator = make_evaluator("litellm", f"http://127.0.0.1:{closed_port()}/v1", key=True)
    evaluator.run(input="q", output="a")
    evaluator.api_base = server.base_url  # now reachable, but its replies cannot be read
    evaluator.run(cases=[{"input": "q", "output": "a [[judge_malformed]]"}] * 2)
    assert kinds(caplog) == ["connection", "malformed_verdict"]
    assert evaluator.run(input="q", output="a").results[0].status == "passed"


def test_with_no_logging_configured_the_warning_reaches_stderr(capsys, monkeypatch):
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # an application that configured nothing
    evaluator = make_evaluator("agno", f"http://127.0.0.1:{closed_port()}/v1", key=True)
    evaluator.run(input="q", output="a")
    err = capsys.readouterr().err
    assert err.count("judge_error") == 1 and "kind='connection'" in err and "model='OpenAI Chat/judge'" in err


def test_a_judge_that_answers_warns_nothing(server: StubLLMServer, caplog):
    caplog.set_level(logging.WARNING, logger="judgehooks")
    evaluator = make_evaluator("agno", server.base_url, key=True)
    assert evaluator.run(input="q", output="a [[fail]]").results[0].status == "failed"
    assert warnings(caplog) == []


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit"), (500, "HTTP 500"), (404, "HTTP 404")])
def test_each_kind_of_judge_error_is_named(server, caplog, status, kind):
    caplog.set_level(logging.WARNING, logger="judgehooks")
    evaluator = make_evaluator("litellm", server.base_url, key=True)
    evaluator.retries = 0
    assert evaluator.run(input="q", output=f"a [[judge_status={status}]]").results[0].status == "error"
    assert kinds(caplog) == [kind]


@pytest.mark.parametrize(("max_retries", "calls"), [(None, 3), (0, 1)])
def test_an_agno_model_keeps_its_own_clients_retries(server, max_retries, calls):
    """The OpenAI SDK retries a 500 twice by itself unless the model says max_retries=0."""
    extra = {} if max_retries is None else {"max_retries": max_retries}
    model = OpenAIChat(id="judge", base_url=server.base_url, api_key="k", **extra)
    evaluator = AgentAsJudgeEval(criteria="c", model=model, store=MemoryStore(), retries=0)
    assert evaluator.run(input="q", output="a [[judge_status=500]]").results[0].status == "error"
    assert server.settings.counts["judge"] == calls
