"""The fast judge client (OpenAI SDK straight) against litellm's own path, same requests side by side.

Each scenario grades the same run of a real agno agent twice, once with the fast path and once with
``fast_path=False`` (``litellm.acompletion``), over HTTP to the loopback stub, and the records must
be the same: status, verdict, tokens, cost, attempts, error type and message. The request bodies the
server received must be the same too.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from judgehooks import AgentAsJudgeEval, LiteLLMJudge, MemoryStore
from judgehooks._base.context import EvalContext
from judgehooks._judges.base import error_name, retry_after_seconds
from judgehooks._judges.prompt import build_request

_NONCE = re.compile(r"[0-9a-f]{16,}")
_COMPARED = ("status", "passed", "score", "reason", "prompt_tokens", "completion_tokens", "cost_usd", "attempts",
             "judge_model", "error_type", "error_message", "mode", "threshold")


def _judge(server, fast: bool, model: str = "openai/judge", **kwargs: Any) -> LiteLLMJudge:
    return LiteLLMJudge(model, api_base=server.base_url, api_key="test-key", fast_path=fast, **kwargs)


def _grade(make_agent, server, question: str, *, fast: bool, model: str = "openai/judge", timeout: float = 10,
           **settings: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    store = MemoryStore()
    judge = _judge(server, fast, model, timeout=timeout)
    evaluator = AgentAsJudgeEval(criteria="The answer echoes the question.", judge=judge, store=store,
                                 retry_backoff=0.01, timeout=timeout, **settings)
    before = len(server.settings.judge_requests)
    make_agent(evaluator).run(question)
    assert (judge.route is not None) is fast  # the path under test is the one taken
    [record] = store.records
    return ({k: getattr(record, k) for k in _COMPARED},
            [_masked(body) for body in server.settings.judge_requests[before:]])


def _masked(body: dict[str, Any]) -> dict[str, Any]:
    """A request body with the per-attempt nonce masked (every attempt draws a fresh one)."""
    messages = [{**m, "content": _NONCE.sub("N", m["content"])} for m in body["messages"]]
    return {**body, "messages": messages}


def _both(make_agent, server, question: str, *, same_message: bool = True, stub: dict[str, Any] | None = None,
          **kw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`stub`: the server's behaviour, set afresh for each path."""
    server.configure(**(stub or {}))
    fast = _grade(make_agent, server, question, fast=True, **kw)
    server.reset()
    server.configure(**(stub or {}))
    slow = _grade(make_agent, server, question, fast=False, **kw)
    if not same_message:  # litellm's message holds a Python traceback; ours names what is missing
        head = "litellm.InternalServerError: InternalServerError: OpenAIException - Invalid response object"
        assert fast[0].pop("error_message").startswith(head) and slow[0].pop("error_message").startswith(head)
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]
    return fast


@pytest.mark.parametrize("question, settings, expected", [
    ("q", {}, ("passed", True, None)),
    ("q [[fail]]", {}, ("failed", False, None)),
    ("q [[score=4]]", {"scoring_strategy": "numeric", "threshold": 7}, ("failed", False, 4)),
    ("q [[score=9]]", {"scoring_strategy": "numeric", "threshold": 7}, ("passed", True, 9)),
])
def test_verdicts_are_the_same_on_both_paths(make_agent, server, question, settings, expected):
    record, bodies = _both(make_agent, server, question, **settings)
    assert (record["status"], record["passed"], record["score"]) == expected
    assert record["prompt_tokens"] > 0 and record["completion_tokens"] > 0
    assert len(bodies) == 1 and bodies[0]["model"] == "judge" and "response_format" in bodies[0]


def test_cost_comes_from_litellm_prices_on_both_paths(make_agent, server):
    record, _ = _both(make_agent, server, "q", model="openai/gpt-4o-mini")
    assert record["cost_usd"] is not None and record["cost_usd"] > 0
    unpriced, _ = _both(make_agent, server, "q")  # openai/judge has no price: None, not 0
    assert unpriced["cost_usd"] is None


def test_cached_prompt_tokens_are_priced_as_litellm_prices_them(make_agent, server):
    """A reply that says part of the prompt came from the provider's cache: the fast path prices
    those tokens at litellm's cache-read rate, as litellm's own cost calculation does."""
    full, _ = _both(make_agent, server, "q [[judge_tokens=4000]]", model="openai/gpt-4o-mini")
    cached, _ = _both(make_agent, server, "q [[judge_tokens=4000]] [[judge_cached_tokens=3000]]",
                      model="openai/gpt-4o-mini")
    assert cached["prompt_tokens"] == full["prompt_tokens"] == 4000
    assert 0 < cached["cost_usd"] < full["cost_usd"]  # the same tokens, most of them at the cheaper rate


def test_a_500_is_the_same_error_on_both_paths(make_agent, server):
    record, bodies = _both(make_agent, server, "q [[judge_status=500]]", retries=1)
    assert (record["status"], record["error_type"], record["attempts"]) == ("error", "InternalServerError", 2)
    assert len(bodies) == 2


def test_a_429_outage_is_retried_the_same_on_both_paths(make_agent, server):
    record, bodies = _both(make_agent, server, "q",
                           stub={"judge_fail_next": 1, "judge_fail_status": 429, "retry_after_s": 0.05})
    assert (record["status"], record["attempts"], len(bodies)) == ("passed", 2, 2)


@pytest.mark.anyio
@pytest.mark.parametrize("fast", [True, False])
async def test_retry_after_and_error_types_reach_the_retry_policy_the_same(server, fast):
    server.configure(judge_fail_next=2, judge_fail_status=429, retry_after_s=7)
    judge = _judge(server, fast)
    await judge.prepare()
    request = build_request(EvalContext(input="q", output="a"), criteria="c", mode="binary")
    with pytest.raises(Exception) as caught:
        await judge.complete(request)
    assert (error_name(caught.value), retry_after_seconds(caught.value)) == ("RateLimitError", 7.0)
    slow_error = None
    if fast:
        with pytest.raises(Exception) as caught_slow:
            await _judge(server, False).complete(request)
        slow_error = caught_slow.value
        assert str(caught.value) == str(slow_error)


# Headers each HTTP library sets for itself, not the SDK: they differ by transport on any path. And
# the SDK's switch for "hand me the response unread", which the SDK path sets to read the reply in
# capped pieces and which the SDK lets through onto the wire: the direct client has no SDK to tell.
_TRANSPORT_OWN = frozenset({"host", "content-length", "accept-encoding", "connection", "x-stainless-raw-response"})


@pytest.mark.anyio
async def test_the_direct_client_sends_what_the_sdks_own_client_sends(server, monkeypatch):
    """The same call through the wire client's own session and through the OpenAI SDK's client: the
    server receives the same headers (the SDK's user agent, key, X-Stainless fields, timeout) and the
    same body."""
    from judgehooks._judges import transport, wire

    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-test")  # a header the SDK adds from the environment
    request = build_request(EvalContext(input="q", output="a"), criteria="c", mode="binary")
    seen = []
    for direct in (True, False):
        monkeypatch.setattr(wire, "proxied", lambda base_url, direct=direct: not direct)
        judge = _judge(server, True, timeout=17)
        await judge.prepare()
        reply = await judge.complete(request)
        assert reply.text and judge.route is not None
        poster = transport.poster(server.base_url, "test-key", 17, judge.route.proxied)
        assert isinstance(poster, transport.DirectPoster) is direct
        transport._POSTERS.pop(asyncio.get_running_loop())  # the next path builds its own poster
        await poster.close()
        headers = {k: v for k, v in server.settings.judge_headers[-1].items() if k not in _TRANSPORT_OWN}
        seen.append((headers, _masked(server.settings.judge_requests[-1]), server.settings.judge_paths[-1]))
    assert seen[0][2] == seen[1][2] == "/v1/chat/completions"
    assert seen[0][0] == seen[1][0], (sorted(set(seen[0][0].items()) ^ set(seen[1][0].items())))
    assert seen[0][1] == seen[1][1]
    headers = seen[0][0]
    assert headers["authorization"] == "Bearer test-key" and headers["openai-project"] == "proj-test"
    assert headers["user-agent"].startswith("AsyncOpenAI/Python") and headers["x-stainless-read-timeout"] == "17.0"


@pytest.mark.anyio
async def test_the_direct_clients_pool_timeouts_and_certificates_are_the_sdks(monkeypatch):
    """What docs/how-to/judge.md says the wire client's own session keeps from the SDK: the SDK's pool size and
    keep-alive, the SDK aiohttp transport's timeouts (connect, pool, each read; no total), and TLS
    verification from the same `httpx.create_ssl_context` with the environment's certificates."""
    import ssl

    import httpx
    import openai

    from judgehooks._judges import transport

    made = []

    def create_ssl_context(**kwargs: Any) -> ssl.SSLContext:
        made.append(kwargs)
        return ssl.create_default_context()

    monkeypatch.setattr(httpx, "create_ssl_context", create_ssl_context)
    base_url = "https://judge.example/v1"
    sdk = openai.AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0)
    client = transport.DirectPoster(sdk, base_url)
    try:
        limits = openai.DEFAULT_CONNECTION_LIMITS
        connector = client._session.connector
        assert (connector.limit, transport.KEEPALIVE_S) == (limits.max_connections, limits.keepalive_expiry)
        assert made == [{"trust_env": True}]
        _, timeouts = client._settings(17.0)
        assert (timeouts.total, timeouts.connect, timeouts.sock_connect, timeouts.sock_read) == (None, 17.0, 17.0, 17.0)
    finally:
        await client.close()


@pytest.mark.anyio
async def test_a_base_url_the_environment_proxies_goes_through_the_sdk_and_reaches_the_proxy(monkeypatch):
    """HTTP_PROXY names a proxy (here a second stub, which answers the proxied request itself): the
    call goes to the proxy, with the judge's URL as its target, as the SDK's client sends it. A host
    NO_PROXY names is not proxied."""
    from judgehooks._judges import transport
    from judgehooks.testing import StubLLMServer

    base_url = "http://judge.invalid:9/v1"  # never resolved: the proxy is asked for it
    with StubLLMServer() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        judge = LiteLLMJudge("openai/judge", api_base=base_url, api_key="test-key", timeout=10)
        assert judge.route is not None and judge.route.proxied  # decided when the judge is built
        await judge.prepare()
        reply = await judge.complete(build_request(EvalContext(input="q", output="a"), criteria="c", mode="binary"))
        assert reply.text and isinstance(transport.poster(base_url, "test-key", 10, True), transport.SdkPoster)
        assert proxy.settings.judge_paths == [f"{base_url}/chat/completions"]
        monkeypatch.setenv("NO_PROXY", "judge.invalid")
        assert not transport.proxied(base_url)


@pytest.mark.anyio
@pytest.mark.parametrize("peer", ["refuses", "hangs up"])
async def test_a_connection_error_is_the_same_error_on_both_paths_and_no_timeout(peer, transport):
    """A port nobody listens on, and a server that accepts and closes at once: a connection error on
    both paths (the SDK's aiohttp transport alone would report either as a timeout)."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    if peer == "refuses":
        listener.close()
    else:
        listener.listen(16)

        def hang_up() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                conn.close()

        threading.Thread(target=hang_up, daemon=True).start()
    request = build_request(EvalContext(input="q", output="a"), criteria="c", mode="binary")
    names = []
    try:
        for fast in (True, False):
            judge = LiteLLMJudge("openai/judge", api_base=f"http://127.0.0.1:{port}/v1", api_key="test-key",
                                 fast_path=fast, timeout=10)
            await judge.prepare()
            with pytest.raises(Exception) as caught:
                await judge.complete(request)
            assert (judge.route is not None) is fast
            names.append(error_name(caught.value))
    finally:
        listener.close()
    assert names[0] == names[1] and names[0] != "Timeout", names


@pytest.mark.anyio
async def test_a_timeout_is_the_same_error_on_both_paths(server, transport):
    request = build_request(EvalContext(input="q [[judge_delay=3000]]", output="a"), criteria="c", mode="binary")
    errors = []
    for fast in (True, False):
        judge = _judge(server, fast, timeout=0.3)
        await judge.prepare()
        with pytest.raises(Exception) as caught:
            await judge.complete(request)
        errors.append(error_name(caught.value))
    assert errors == ["Timeout", "Timeout"]


@pytest.mark.parametrize("question, error_type", [
    ("q [[judge_malformed]]", "MalformedVerdict"),  # the judge's text is no verdict
    ("q [[judge_body=not%20json]]", "InternalServerError"),  # the body is no JSON
    ("q [[judge_body=%5B1%5D]]", "InternalServerError"),  # JSON, but no object
    ("q [[judge_body=%7B%7D]]", "InternalServerError"),  # an object, but no chat completion
    ("q [[judge_body=%7B%22choices%22%3A7%7D]]", "InternalServerError"),  # choices that are no list
    ("q [[judge_body=%7B%22choices%22%3A%5B%5D%7D]]", "MalformedVerdict"),  # no choices
])
def test_malformed_replies_are_the_same_error_on_both_paths(make_agent, server, question, error_type):
    record, _ = _both(make_agent, server, question, retries=0)
    assert (record["status"], record["error_type"]) == ("error", error_type)


def test_a_choice_without_a_message_is_the_same_error_type_on_both_paths(make_agent, server):
    record, _ = _both(make_agent, server, "q [[judge_body=%7B%22choices%22%3A%5B%7B%7D%5D%7D]]", retries=0,
                      same_message=False)
    assert (record["status"], record["error_type"]) == ("error", "InternalServerError")


def test_a_server_refusing_structured_output_falls_back_the_same(make_agent, server):
    record, bodies = _both(make_agent, server, "q [[fail]]", stub={"judge_structured": False})
    assert record["status"] == "failed"
    assert ["response_format" in b for b in bodies] == [True, False]


def test_the_fast_path_can_be_turned_off(server, monkeypatch):
    assert _judge(server, True).route is not None
    assert _judge(server, False).route is None
    assert LiteLLMJudge("openai/judge", api_base=server.base_url, api_key="k", fast_path=True,
                        litellm_kwargs={"extra_headers": {"x": "y"}}).route is None  # litellm options: litellm
    assert LiteLLMJudge("anthropic/claude-3-5-haiku-latest", api_key="k").route is None  # other wire formats
    # parameters litellm refuses for the model: its path, whose error names them
    assert LiteLLMJudge("openai/gpt-5-mini", api_base=server.base_url, api_key="k", temperature=0.0).route is None
    monkeypatch.setenv("OPENAI_ORGANIZATION", "org-1")  # litellm sends it; the fast path would not
    assert _judge(server, True).route is None
    monkeypatch.delenv("OPENAI_ORGANIZATION")
    monkeypatch.setenv("JUDGEHOOKS_FAST_JUDGE", "0")
    assert _judge(server, True).route is None


def test_judge_processes_take_the_same_path(make_agent, server):
    """The helper judge process rebuilds the judge from its settings, the fast path setting included,
    and its replies say which path it took."""
    for fast in (True, False):
        store = MemoryStore()
        judge = _judge(server, fast)
        evaluator = AgentAsJudgeEval(criteria="c", judge=judge, store=store, judge_process=True, retry_backoff=0.01)
        make_agent(evaluator).run("q [[fail]]")
        [record] = store.records
        assert record.status == "failed"
        assert evaluator.judge._config["fast_path"] is fast
        assert evaluator.judge.fast_path_taken is fast


def test_litellm_callbacks_keep_calls_on_litellm(server, monkeypatch):
    import litellm

    monkeypatch.setattr(litellm, "success_callback", ["langfuse"])
    assert _judge(server, True).route is None  # a user's litellm logging still sees every judge call


def test_a_missing_key_goes_through_litellm_and_names_the_variable(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = LiteLLMJudge("openai/judge", api_base=server.base_url)
    assert judge.route is None  # litellm's path, whose error says which variable to set


@pytest.mark.anyio
async def test_the_client_is_chosen_once_when_the_judge_is_built_and_named_in_its_repr(server, monkeypatch, caplog):
    """Nothing is checked again per call: a litellm callback set after a judge is built leaves that
    judge on the client it has (its repr and its `judge_client` log line say which); a judge built
    after it goes through litellm, so the callback sees its calls (docs/how-to/judge.md)."""
    import logging

    import litellm

    caplog.set_level(logging.INFO, logger="judgehooks")
    before = _judge(server, True)
    assert "client=WireClient(" in repr(before) and "test-key" not in repr(before)
    assert any("judge_client" in r.getMessage() and "client='wire'" in r.getMessage() for r in caplog.records)
    request = build_request(EvalContext(input="q", output="a"), criteria="c", mode="binary")
    through_litellm: list[str] = []
    acompletion = litellm.acompletion

    async def counted(*args: Any, **kwargs: Any) -> Any:
        through_litellm.append(kwargs["model"])
        return await acompletion(*args, **kwargs)

    monkeypatch.setattr(litellm, "acompletion", counted)
    monkeypatch.setattr(litellm, "success_callback", [lambda *args: None])  # e.g. a user's logging
    assert (await before.complete(request)).text and through_litellm == []
    after = _judge(server, True)
    assert "client=LiteLLMClient(" in repr(after)
    await after.prepare()
    assert (await after.complete(request)).text and through_litellm == ["openai/judge"]


def test_each_loops_clients_close_on_that_loop_as_it_shuts_down(server):
    """A program that calls `asyncio.run` again and again (a script, a test suite) gets a client per
    loop; each is closed by its own loop's shutdown, so nothing is left for the garbage collector to
    close later on a loop that is already closed ("Task exception was never retrieved")."""
    import subprocess
    import sys

    code = f"""
import asyncio, gc, os
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
from judgehooks import LiteLLMJudge
from judgehooks._base.context import EvalContext
from judgehooks._judges import transport
from judgehooks._judges.prompt import build_request

judge = LiteLLMJudge("openai/judge", api_base={server.base_url!r}, api_key="test-key")
request = build_request(EvalContext(input="q", output="a"), criteria="c", mode="binary")
clients = []

async def one():
    await judge.prepare()
    reply = await judge.complete(request)
    assert reply.text and judge.route is not None
    clients.extend(transport._POSTERS[asyncio.get_running_loop()].values())

for _ in range(3):
    asyncio.run(one())
    gc.collect()
print(len(clients), len({{id(c) for c in clients}}), all(c.is_closed() for c in clients))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "3", "True"]
    assert "Event loop is closed" not in out.stderr and "never retrieved" not in out.stderr, out.stderr


def test_a_judge_process_is_sent_the_prompt_exactly(make_agent, server):
    """Requests cross the pipe to the helper as JSON lines (pydantic-core's encoder): text beyond
    ASCII reaches the judge as it was, as from the in-process judge."""
    criteria = "Répond en français: « oui » ✓ 日本語"
    sent = []
    for process in (False, True):
        store = MemoryStore()
        evaluator = AgentAsJudgeEval(criteria=criteria, judge=_judge(server, True), store=store,
                                     judge_process=process, retries=0)
        make_agent(evaluator).run("q é")
        [record] = store.records
        assert record.status == "passed"
        sent.append(server.settings.judge_requests[-1]["messages"])
    assert criteria in sent[1][0]["content"] and "q é" in sent[1][1]["content"]
    nonce = [m[0]["content"].split("contain the code ")[1][:16] for m in sent]
    assert [[m["content"].replace(n, "N") for m in s] for s, n in zip(sent, nonce, strict=True)] == \
        [[m["content"].replace(nonce[0], "N") for m in sent[0]]] * 2


def test_a_json_line_carries_text_utf8_cannot_as_json_dumps_escapes():
    """What cannot be UTF-8 (a lone surrogate, e.g. in an error message the helper sends back) takes
    `json.dumps`'s escapes: the other end reads the same string, nothing is lost or raised."""
    import json

    from judgehooks._judges.lines import json_line, read_json_line
    for message in ({"id": 1, "text": "fine é ✓"}, {"id": 2, "error": {"message": "bad \ud800 body"}}):
        line = json_line(message)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert json.loads(line) == message == read_json_line(line.rstrip(b"\n"))
    with pytest.raises(ValueError):
        read_json_line(b'{"id": 3, "text": "cut sh')
