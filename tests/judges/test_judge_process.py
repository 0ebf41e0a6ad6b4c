"""The judge helper process (`ProcessJudge`, `python -m judgehooks._judges.worker`): requests cross
its stdin as JSON lines read on its event loop, in chunks that split lines anywhere, and what is not
a request never stops it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from judgehooks import LiteLLMJudge
from judgehooks._judges import process
from judgehooks._judges.lines import CHUNK, LineSplitter, read_json_line
from judgehooks._judges.process import ProcessJudge
from judgehooks._judges.prompt import JudgeRequest


def test_long_prompts_and_many_calls_at_once_cross_the_pipe_whole(server):
    """64 calls at once, each prompt 200 KB (three of the reader's chunks and more), each with its
    own text: every one reaches the judge as sent, and every answer comes back to its own call."""
    judge = ProcessJudge(LiteLLMJudge("openai/judge", api_base=server.base_url, api_key="k"))
    prompts = [f"call {i}: " + "é✓x" * 70_000 for i in range(64)]

    async def main() -> list[str]:
        replies = await asyncio.gather(*(judge.complete(JudgeRequest(
            messages=({"role": "system", "content": "judge"}, {"role": "user", "content": p}), mode="binary",
            nonce="")) for p in prompts))
        return [r.text for r in replies]

    texts = asyncio.run(main())
    assert len(texts) == 64 and all(json.loads(t)["passed"] is True for t in texts)
    seen = sorted(r["messages"][1]["content"] for r in server.settings.judge_requests[-64:])
    assert seen == sorted(prompts) and len(prompts[0].encode()) > 3 * CHUNK


def test_lines_split_anywhere_come_out_whole():
    lines = LineSplitter()
    data = b"".join(json.dumps({"n": i, "pad": "x" * (i * 37 % 500)}).encode() + b"\n" for i in range(200))
    out, i = [], 0
    for size in (1, 7, 64, 1000, 3, 65536) * 50:
        out += lines.feed(data[i:i + size])
        i += size
        if i >= len(data):
            break
    assert [json.loads(line)["n"] for line in out] == list(range(200)) and lines.rest() == []
    assert lines.feed(b'{"last": 1}') == [] and lines.rest() == [b'{"last": 1}']


def test_the_helper_skips_a_line_that_is_not_a_request_and_answers_the_rest(server):
    """Only the parent writes to the helper; still, a line that is not a JSON object is skipped (and
    said on stderr, which the parent shares) and one that lacks what a request has is answered as an
    error, and the requests after them are answered."""
    config = {"model": "openai/judge", "structured_output": True, "fast_path": True,
              "kwargs": {"api_base": server.base_url, "api_key": "k", "timeout": 30, "max_retries": 0,
                         "num_retries": 0}}
    request = {"id": 7, "messages": [{"role": "user", "content": "q"}], "mode": "binary"}
    proc = subprocess.Popen([sys.executable, "-m", "judgehooks._judges.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    out, err = proc.communicate(b"".join(json.dumps(m).encode() + b"\n" for m in (config,)) +
                                b"not json at all\n" + b"[1, 2]\n" + b'{"id": 3}\n' + json.dumps(request).encode() +
                                b"\n", timeout=60)
    replies = {r["id"]: r for r in map(json.loads, out.splitlines())}
    assert proc.returncode == 0 and set(replies) == {3, 7}
    assert replies[3]["error"]["type"] == "KeyError" and json.loads(replies[7]["text"])["passed"] is True
    assert err.count(b"skipped a request line that is not a JSON object") == 2  # said, not silent


def test_a_reply_line_with_an_id_no_call_can_have_is_skipped_and_the_calls_are_still_answered(tmp_path, monkeypatch):
    """A helper that writes `{"id": {...}}` (JSON, but an id no call can have: unhashable) before each
    answer: the parent's reader skips it and answers the calls, instead of dying and leaving every
    call on that helper to wait out its timeout."""
    helper = tmp_path / "helper"
    helper.write_text(f"#!{sys.executable}\n" + (
        "import json, sys\n"
        "sys.stdin.readline()\n"  # the judge's configuration
        "for line in sys.stdin:\n"
        "    call = json.loads(line)['id']\n"
        "    sys.stdout.write(json.dumps({'id': {'x': call}}) + '\\n')\n"
        "    sys.stdout.write(json.dumps({'id': call, 'text': '{\"passed\": true}'}) + '\\n')\n"
        "    sys.stdout.flush()\n"))
    helper.chmod(0o755)
    monkeypatch.setattr(process, "sys", SimpleNamespace(executable=str(helper)))
    judge = ProcessJudge(LiteLLMJudge("openai/judge", api_base="http://127.0.0.1:9/garbage-helper", api_key="k"))
    request = JudgeRequest(messages=({"role": "user", "content": "q"},), mode="binary", nonce="")

    async def main() -> list[str]:
        first = await asyncio.wait_for(judge.complete(request), 20)
        second = await asyncio.wait_for(judge.complete(request), 20)
        return [first.text, second.text]

    child = judge._ensure()
    try:
        assert asyncio.run(main()) == ['{"passed": true}'] * 2
    finally:
        child.close()


def test_a_line_nested_too_deep_is_no_json_line():
    """`read_json_line` raises only ValueError (what both ends of the pipe skip), also for a line
    nested deeper than Python's stack, which `json.loads` meets with a RecursionError."""
    with pytest.raises(ValueError, match="nested too deep"):
        read_json_line(b'{"id": ' + b"[" * 100_000)


def test_a_call_the_caller_gave_up_on_is_ended_by_the_helper_at_its_timeout_too():
    """A judge that sends its headers, then a byte now and then (each within the read timeout, so no
    read ever times out): the caller stops waiting at its timeout, and the helper process must too,
    or every such reply holds one of its connections for as long as the server drips."""
    import socket
    import threading
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    closed: list[float] = []

    def drip() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        started = time.monotonic()
        try:
            while time.monotonic() - started < 30:
                conn.sendall(b" ")
                time.sleep(0.2)
        except OSError:  # the client hung up
            closed.append(time.monotonic() - started)
        conn.close()

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    judge = ProcessJudge(LiteLLMJudge("openai/judge", api_base=f"http://127.0.0.1:{listener.getsockname()[1]}/v1",
                                      api_key="k", timeout=1))
    request = JudgeRequest(messages=({"role": "user", "content": "q"},), mode="binary", nonce="")

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(judge.complete(request), 1)

    child = judge._ensure()
    try:
        asyncio.run(main())
        thread.join(30)
        assert closed and closed[0] < 10, closed  # hung up after about its 1 s timeout, not after 30 s
    finally:
        child.close()
        listener.close()
