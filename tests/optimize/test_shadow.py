"""Shadow A/B on live traffic: a candidate answers each sampled run's input in the background, and a
blind pairwise judge (over the loopback server) says which answer is better."""

from __future__ import annotations

import json
import re
import threading

import pytest
from agno.agent import Agent
from agno.models.openai.like import OpenAILike

import judgehooks
from judgehooks import Shadow, shadow_report
from judgehooks.stores import MemoryStore

GOOD = "A careful, complete answer."
POOR = "meh"


class PairwiseJudge:
    """The loopback server's judge for pairwise prompts: prefers the answer holding GOOD, ties when
    both or neither do; keeps every judge request it saw. Agents answer by `[[answer=...]]`."""

    def __init__(self, server, *, quote: bool = False, status: int | None = None) -> None:
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.quote = quote
        server.configure(handler=self)

    def __call__(self, body: dict) -> str | None:
        if not str(body.get("model", "")).startswith("judge"):
            return None  # the agents: the server's own behaviour
        with self.lock:
            self.requests.append(body)
        system, user = (m["content"] for m in body["messages"])
        nonce = re.search(r"contain the code ([0-9a-f]+)", system).group(1)
        answers = dict(re.findall(rf"<<<ANSWER-([AB])-{nonce}>>>\n(.*?)\n<<<END-ANSWER-\1-{nonce}>>>", user, re.S))
        good = [label for label, text in answers.items() if GOOD in text]
        winner = good[0] if len(good) == 1 else "tie"
        verdict = json.dumps({"winner": winner, "reason": "compared", "nonce": nonce})
        if self.quote:  # a judge that quotes both answers before its own verdict, in plain text
            return f"Answer A said: {answers.get('A')}\nAnswer B said: {answers.get('B')}\n{verdict}"
        return verdict


def agent(server, answer: str, *hooks, model_id: str = "agent", name: str = "live") -> Agent:
    return Agent(name=name, model=OpenAILike(id=model_id, base_url=server.base_url, api_key="test-key"),
                 instructions=f"[[answer={answer}]]", post_hooks=list(hooks), telemetry=False)


def shadow(server, store, candidate=None, **kw) -> Shadow:
    kw.setdefault("judge_model", "openai/judge")
    kw.setdefault("sample_rate", 1.0)
    return Shadow(candidate, api_base=server.base_url, api_key="test-key", store=store, retry_backoff=0.01,
                  timeout=10, name=kw.pop("name", "shadow-test"), **kw)


def test_a_candidate_that_answers_better_wins_and_the_report_says_promote(server, store):
    judge = PairwiseJudge(server)
    ev = shadow(server, store, agent(server, GOOD, name="candidate"))
    live = agent(server, POOR, ev)
    for i in range(12):
        out = live.run(f"question {i}")
        assert out.content == POOR  # the user's answer is the live agent's, unchanged
    assert judgehooks.drain(30)
    assert len(store.records) == 12 and len(judge.requests) == 12
    assert {r.details["winner"] for r in store.records} == {"candidate"}
    assert all(r.details["candidate_output"] == GOOD and r.status == "passed" for r in store.records)
    report = shadow_report(store, "shadow-test")
    assert (report.comparisons, report.wins, report.losses, report.ties) == (12, 12, 0, 0)
    assert report.decision == "promote" and report.p_value < 0.05
