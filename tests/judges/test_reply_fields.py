"""A judge reply whose fields beside the verdict have the wrong type (a gateway's `"model": 123`, a
custom judge's token count as text): each evaluation still ends as exactly one stored record, and no
hook or background worker raises."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from judgehooks import AgentAsJudgeEval, LiteLLMJudge, MemoryStore
from judgehooks._judges.base import JudgeReply
from judgehooks.testing import FakeJudge


@pytest.mark.parametrize("model", [123, ["judge"], {"id": "judge"}, True])
def test_a_reply_naming_its_model_with_no_string_keeps_its_verdict(make_agent, server, model):
    """Through litellm, which hands the reply's `model` on as it came: the record names the judge's
    own model, and the verdict stands."""
    verdict = json.dumps({"passed": False, "reason": "wrong"})
    body = json.dumps({"id": "x", "object": "chat.completion", "model": model, "choices": [
        {"index": 0, "message": {"role": "assistant", "content": verdict}, "finish_reason": "stop"}]})
    store = MemoryStore()
    judge = LiteLLMJudge("openai/judge", api_base=server.base_url, api_key="k", fast_path=False)
    make_agent(AgentAsJudgeEval(criteria="c", judge=judge, store=store, retries=0)).run(
        f"q [[judge_body={quote(body)}]]")
    [record] = store.records
    assert (record.status, record.passed, record.judge_model) == ("failed", False, "openai/judge")


def test_an_outcome_no_record_can_hold_is_an_error_record_naming_the_field(make_agent):
    """A custom judge whose reply gives its token count as text: the grading ends as an error record
    naming the field, not as an exception out of `Pipeline.grade` (a crashed hook, a job that crashes
    its worker on every claim)."""
    def reply(request):
        return JudgeReply(text='{"passed": true, "reason": "ok"}', prompt_tokens="many")  # type: ignore[arg-type]

    store = MemoryStore()
    make_agent(AgentAsJudgeEval(criteria="c", judge=FakeJudge(reply), store=store, retries=0)).run("q")
    [record] = store.records
    assert (record.status, record.passed, record.error_type) == ("error", None, "BadOutcome")
    assert "prompt_tokens" in record.error_message
