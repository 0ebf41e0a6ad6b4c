"""A runaway judge (a small model that repeats its reason until its token cap): every judge call
carries a cap (``max_tokens``, 1,024 by default; ``maxLength`` on the reason where the server enforces
it). A reply cut there after its verdict (a JSON schema puts the verdict first) keeps the verdict and
says it was cut; one cut before its verdict (free text: the reasoning first) is asked once more with
a firmer instruction, then ends as one `VerdictCut` error record naming the cap: never three attempts
of the same question, never a wait for the timeout. Through a real agent's post_hooks, over HTTP to
the loopback stub, on each way a litellm model string is called (the wire client, litellm, a helper
judge process)."""

from __future__ import annotations

from typing import Any

import pytest

from judgehooks import AgentAsJudgeEval, LiteLLMJudge, MemoryStore
from judgehooks._judges.prompt import FIRMER, REASON_CHARS, REPLY_TOKENS

PATHS = ["wire", "litellm", "judge process"]


def _grade(make_agent, server, question: str, path: str, **judge_settings: Any) -> Any:
    store = MemoryStore()
    judge = LiteLLMJudge("openai/judge", api_base=server.base_url, api_key="test-key", timeout=30,
                         fast_path=path != "litellm", **judge_settings)
    assert judge.client.name == ("litellm" if path == "litellm" else "wire")
    evaluator = AgentAsJudgeEval(criteria="The answer echoes the question.", judge=judge, store=store,
                                 retry_backoff=0.01, judge_process=path == "judge process")
    make_agent(evaluator).run(question)
    [record] = store.records
    return record


def _last_message(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


@pytest.mark.parametrize("path", PATHS)
def test_a_runaway_before_its_verdict_ends_at_its_cap_as_one_error_record_naming_it(make_agent, server, path):
    record = _grade(make_agent, server, "q [[judge_runaway]]", path, structured_output=False)
    assert (record.status, record.error_type, record.passed) == ("error", "VerdictCut", None)
    assert f"max_tokens={REPLY_TOKENS}" in record.error_message and "finish_reason 'length'" in record.error_message
    assert record.attempts == 2  # the question, then once more firmly: not the retry policy's three
    bodies = server.settings.judge_requests
    assert [b["max_tokens"] for b in bodies] == [REPLY_TOKENS, REPLY_TOKENS]
    assert FIRMER not in _last_message(bodies[0]) and _last_message(bodies[1]).endswith(FIRMER)


@pytest.mark.parametrize("path", PATHS)
def test_a_runaway_told_firmly_still_gives_its_verdict(make_agent, server, path):
    record = _grade(make_agent, server, "q [[judge_runaway=until_told]]", path, structured_output=False)
    assert (record.status, record.passed, record.attempts) == ("passed", True, 2)


@pytest.mark.parametrize("path", PATHS)
def test_a_runaway_after_its_verdict_keeps_the_verdict_and_the_record_says_the_reply_was_cut(
        make_agent, server, path):
    record = _grade(make_agent, server, "q [[judge_runaway]]", path)  # the schema: the verdict, then the reason
    assert (record.status, record.passed, record.attempts) == ("passed", True, 1)
    assert record.details["reply"] == f"cut at the judge's token cap (max_tokens={REPLY_TOKENS})"
    assert server.settings.judge_requests[-1]["max_tokens"] == REPLY_TOKENS


def test_with_no_retries_allowed_a_runaway_is_not_asked_again(make_agent, server):
    store = MemoryStore()
    evaluator = AgentAsJudgeEval(criteria="c", model="openai/judge", api_base=server.base_url, api_key="k",
                                 store=store, retries=0, structured_output=False)
    make_agent(evaluator).run("q [[judge_runaway=until_told]]")
    [record] = store.records
    assert (record.error_type, record.attempts, server.settings.counts["judge"]) == ("VerdictCut", 1, 1)


def test_the_reason_is_capped_in_the_schema_where_the_server_enforces_it(make_agent, server):
    """An OpenAI-compatible server of one's own (llama.cpp, vLLM) enforces ``maxLength`` while decoding;
    OpenAI's strict mode refuses the keyword, so OpenAI's own API is told in the description only."""
    _grade(make_agent, server, "q", "wire")
    reason = server.settings.judge_requests[-1]["response_format"]["json_schema"]["schema"]["properties"]["reason"]
    assert reason["maxLength"] == REASON_CHARS and str(REASON_CHARS) in reason["description"]
    hosted = LiteLLMJudge("openai/gpt-4o-mini", api_key="k").route
    assert hosted is not None
    schema = hosted.params[("binary", True)]["response_format"]["json_schema"]["schema"]
    assert "maxLength" not in schema["properties"]["reason"] and str(REASON_CHARS) in str(schema)


def test_the_cap_is_a_setting_and_a_reasoning_model_gets_none_by_default(make_agent, server):
    for given in ({"max_tokens": 300}, {"litellm_kwargs": {"max_tokens": 300}}):
        judge = LiteLLMJudge("openai/judge", api_base=server.base_url, api_key="k", **given)  # type: ignore[arg-type]
        assert (judge.max_tokens, judge.client.name) == (300, "wire")
    _grade(make_agent, server, "q", "wire", max_tokens=300)
    assert server.settings.judge_requests[-1]["max_tokens"] == 300
    # its thinking counts against the cap: none unless given (then litellm names the parameter for it)
    assert LiteLLMJudge("openai/gpt-5-mini", api_key="k").max_tokens is None
    assert LiteLLMJudge("openai/gpt-5-mini", api_key="k", max_tokens=4000).client.name == "litellm"


@pytest.mark.anyio
async def test_a_model_asked_for_free_text_is_not_capped(server):
    """What optimize asks its reflection model for is instructions (kept up to MAX_TEXT_CHARS), not a
    verdict: no max_tokens goes with it."""
    from judgehooks._judges.text import TextModel

    bodies: list[dict[str, Any]] = []
    server.configure(handler=lambda body: bodies.append(body) or "new instructions")
    reply = await TextModel("openai/reflect", api_base=server.base_url, api_key="k").ask(
        [{"role": "user", "content": "improve these instructions"}])
    assert reply.text == "new instructions" and len(bodies) == 1 and "max_tokens" not in bodies[0]


@pytest.mark.parametrize("bad", [0, -1, 1.5, float("nan"), "300", True])
def test_max_tokens_is_refused_by_name_when_not_a_positive_integer(bad):
    with pytest.raises(ValueError, match="max_tokens must be an integer >= 1"):
        LiteLLMJudge("openai/judge", max_tokens=bad)
