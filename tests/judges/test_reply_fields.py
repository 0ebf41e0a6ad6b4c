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


PRICED = "openai/gpt-4o-mini"  # a model litellm's local price list knows: every path prices its calls


@pytest.mark.parametrize("path", ["wire", "litellm", "process"])
@pytest.mark.parametrize("tokens", [-5, 10**30, 10**400], ids=["negative", "1e30", "1e400"])
def test_a_count_out_of_bounds_keeps_its_verdict_and_no_cost_and_trips_no_cap(make_judge, make_agent, store,
                                                                             monkeypatch, path, tokens):
    """A judge reporting a negative or absurd token count (the same on the fast path, litellm's path and
    through a judge process): the verdict stands; the count and the cost priced from it are kept out
    of the record and of the spend cap, and the record names them. Before, a negative count was
    recorded, 10**30 tripped the cap for the day, and 10**400 overflowed into an error record."""
    monkeypatch.setenv("JUDGEHOOKS_FAST_JUDGE", "0" if path == "litellm" else "1")
    judge = make_judge(name=f"bounds-{path}-{len(str(tokens))}", model=PRICED, judge_process=path == "process",
                       max_cost_usd=0.01, per="day")
    agent = make_agent(judge)
    agent.run(f"q1 [[judge_tokens={tokens}]]")
    agent.run("q2")
    first, second = sorted(store.records, key=lambda r: r.input)
    assert (first.status, first.passed, first.prompt_tokens, first.cost_usd) == ("passed", True, None, None)
    assert first.details["usage"].startswith(f"the judge reported prompt_tokens={tokens!r:.40}")
    assert first.completion_tokens is not None and first.completion_tokens > 0  # the sound count is kept
    assert (second.status, second.details.get("usage")) == ("passed", None)  # graded: no cap tripped
    assert second.cost_usd is not None and 0 < second.cost_usd < 0.01


@pytest.mark.parametrize("figures", [{"cost_usd": -1.0}, {"cost_usd": float("nan")}, {"cost_usd": 1e6},
                                     {"completion_tokens": -1, "cost_usd": 0.5}])
def test_a_custom_judge_reporting_figures_out_of_bounds_has_them_named_not_metered(make_agent, figures):
    """A custom judge's own figures pass the same bounds: a negative cost cannot buy room under a cap."""
    store = MemoryStore()
    reply = JudgeReply(text='{"passed": true, "reason": "ok"}', **figures)
    assert reply.unusable is not None and all(getattr(reply, name) is None for name in figures)
    ev = AgentAsJudgeEval(criteria="c", judge=FakeJudge(lambda request: reply), store=store, retries=0,
                          max_cost_usd=0.5, per="day", name=f"custom-{figures}")
    make_agent(ev).run("q")
    [record] = store.records
    assert (record.status, record.cost_usd) == ("passed", None)
    assert record.details["usage"] == f"the judge reported {reply.unusable}: out of bounds, not kept"
