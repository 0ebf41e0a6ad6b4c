"""Shared by the Shadow tests: agents that answer what they are told, and a pairwise judge on the
loopback server that prefers the better answer and keeps every request it saw."""

from __future__ import annotations

import json
import re
import threading

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

from judgehooks import Shadow

GOOD = "A careful, complete answer."
POOR = "meh"


class PairwiseJudge:
    """The loopback server's judge for pairwise prompts: prefers the answer holding GOOD, ties when
    both or neither do; keeps every judge request it saw. Agents answer by `[[answer=...]]`."""

    def __init__(self, server, *, quote: bool = False) -> None:
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.quote = quote
        server.configure(handler=self)

    def __call__(self, body: dict) -> str | None:
        system = body["messages"][0]["content"] if body.get("messages") else ""
        if not str(body.get("model", "")).startswith("judge") or "Two AI answers" not in str(system):
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
