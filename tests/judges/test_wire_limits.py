"""The judge wire's limits (audit 3, L1 and L2), over real HTTP to loopback stub servers through a real
agno agent: a redirect is never followed (the prompt never reaches the server it points to), and a
reply past `max_reply_bytes` is an error record naming the limit, with reading stopped early. On
each of the fast client's transports (the `transport` fixture, tests/conftest.py)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from judgehooks import AgentAsJudgeEval, LiteLLMJudge, MemoryStore
from judgehooks.testing import StubLLMServer


def _grade(make_agent, server, question: str, **judge_settings: Any) -> tuple[Any, LiteLLMJudge]:
    store = MemoryStore()
    judge = LiteLLMJudge("openai/judge", api_base=server.base_url, api_key="test-key", timeout=30, **judge_settings)
    evaluator = AgentAsJudgeEval(criteria="The answer echoes the question.", judge=judge, store=store,
                                 retries=2, retry_backoff=0.01)
    make_agent(evaluator).run(question)
    [record] = store.records
    return record, judge


def test_a_redirect_to_another_origin_is_refused_and_the_prompt_never_goes_there(make_agent, server, transport):
    with StubLLMServer() as elsewhere:
        target, port = quote(f"{elsewhere.base_url}/chat/completions", safe=""), elsewhere.port
        record, judge = _grade(make_agent, server, f"q [[judge_redirect={target}]]")
        assert judge.route is not None  # the fast client
        assert elsewhere.settings.counts["judge"] == 0 and elsewhere.settings.judge_prompts == []
    assert (record.status, record.error_type, record.passed) == ("error", "JudgeUnavailable", None)
    assert "redirect to another origin" in record.error_message and f":{port}" in record.error_message
    assert server.settings.counts["judge_redirected"] == 1 and record.attempts == 1  # refused, not retried


def test_a_redirect_to_the_same_server_is_refused_too(make_agent, server, transport):
    """The decision (docs/security.md): no redirect is followed; the judge's URL is set to the one that answers."""
    target = quote(f"{server.base_url}/chat/completions", safe="")
    record, _ = _grade(make_agent, server, f"q [[judge_redirect={target}]]")
    assert (record.status, record.error_type) == ("error", "JudgeUnavailable")
    assert "redirect to the same server" in record.error_message
    assert server.settings.counts["judge"] == 1


def test_a_reply_past_the_default_cap_is_an_error_naming_the_limit_and_reading_stops(make_agent, server, transport):
    size = 24 * 1024 * 1024  # six times the 4 MiB default
    record, judge = _grade(make_agent, server, f"q [[judge_reply_bytes={size}]]")
    assert judge.route is not None and judge.max_reply_bytes == 4 * 1024 * 1024
    assert (record.status, record.error_type, record.passed) == ("error", "JudgeUnavailable", None)
    assert f"max_reply_bytes={4 * 1024 * 1024}" in record.error_message
    assert server.settings.counts["judge_bytes_sent"] < size  # the client hung up: the rest was never sent


def test_max_reply_bytes_is_configurable_and_a_reply_within_it_is_read(make_agent, server, transport):
    record, _ = _grade(make_agent, server, "q [[judge_reply_bytes=300000]]", max_reply_bytes=1_000_000)
    assert record.status == "passed"
    record, _ = _grade(make_agent, server, "q [[judge_reply_bytes=300000]]", max_reply_bytes=100_000)
    assert record.error_type == "JudgeUnavailable" and "max_reply_bytes=100000" in record.error_message


def test_through_litellm_a_reply_text_past_the_cap_is_an_error_too(make_agent, server):
    """litellm reads the whole body itself: the text it hands back is held to the cap."""
    record, judge = _grade(make_agent, server, "q [[reason_chars=300000]]", max_reply_bytes=100_000,
                           fast_path=False)
    assert judge.route is None
    assert record.error_type == "JudgeUnavailable" and "max_reply_bytes=100000" in record.error_message


@pytest.mark.parametrize("bad", [0, -1, 1.5, float("nan"), "4MiB", True])
def test_max_reply_bytes_is_refused_by_name_when_not_a_positive_integer(bad):
    with pytest.raises(ValueError, match="max_reply_bytes must be an integer >= 1"):
        LiteLLMJudge("openai/judge", max_reply_bytes=bad)


@pytest.mark.parametrize("reply", ["{" * 100_000, '{"passed":' * 100_000])
def test_a_long_reply_that_is_no_json_verdict_is_an_error_naming_its_length_not_a_long_search(
        make_agent, server, reply):
    """Within max_reply_bytes, a reply of 100,000 `{`s cost the verdict search seconds on the event loop
    (a failed JSON decode at every brace, each counting the lines before it: time grows with the square
    of the length, minutes at 4 MiB), and deep nesting raised RecursionError. A reply that is no single
    JSON verdict is searched up to a length, past it an unreadable reply."""
    server.configure(handler=lambda body: reply)
    record, _ = _grade(make_agent, server, "q")
    assert (record.status, record.error_type, record.passed) == ("error", "MalformedVerdict", None)
    assert f"{len(reply)} characters" in record.error_message and record.attempts == 3


@pytest.mark.parametrize("location", ["http://127.0.0.1:99999/v1/chat/completions", "http://[::1/x"])
def test_a_redirect_to_a_url_that_cannot_be_parsed_is_refused_by_name(make_agent, server, transport, location):
    """A Location whose port is out of range or whose IPv6 host never closes: the record still says a
    redirect was refused, not `ValueError: Port out of range`."""
    record, _ = _grade(make_agent, server, f"q [[judge_redirect={quote(location, safe='')}]]")
    assert (record.status, record.error_type) == ("error", "JudgeUnavailable")
    assert "judgehooks follows no redirect" in record.error_message
