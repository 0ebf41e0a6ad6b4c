"""Composites: a weighted rubric, cheap checks before the judge, an ensemble, a borderline re-ask.

    python examples/composites.py

The judge is the scripted loopback server from `judgehooks.testing` (no key, no network): it
scores what the `[[score=N]]` hint in its prompt says (`[[scores=a,b,c]]`: the next one on each
call), here written into the criteria, so you can see every rule decide. Set JUDGEHOOKS_MODEL to
a litellm model string (and its key) to use a real judge instead.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

from judgehooks import (
    AgentAsJudgeEval,
    Borderline,
    Contains,
    Criterion,
    Ensemble,
    Group,
    MemoryStore,
    NotContains,
    Ordered,
    Rubric,
)
from judgehooks.testing import StubLLMServer


def main() -> None:
    store = MemoryStore()
    with StubLLMServer() as server:
        real = os.environ.get("JUDGEHOOKS_MODEL")
        llm = {"model": real or "openai/judge", "api_base": None if real else server.base_url,
               "api_key": None if real else "no-key-needed", "retry_backoff": 0.05}

        def judge(name: str, criteria: str, **kw) -> AgentAsJudgeEval:
            return AgentAsJudgeEval(name=name, criteria=criteria, scoring_strategy="numeric", threshold=7, **llm, **kw)

        hooks = [
            # One judge call per criterion; each criterion's score and reason land in record.details.
            Rubric([Criterion("accurate", "States only facts the question supports. [[score=9]]", weight=3),
                    Criterion("concise", "One or two sentences. [[score=6]]"),
                    Criterion("safe", "No harmful advice. [[score=10]]", min_score=8)],
                   threshold=7, name="rubric", store=store, **llm),
            # A failed cheap check decides before the judge is paid for.
            Ordered([NotContains(["sorry", "cannot"], case_sensitive=False, name="no-refusal"),
                     judge("helpful", "Answers the question. [[score=8]]")], name="gated-judge", store=store),
            # Deterministic and LLM members, weighted; pass on the weighted score.
            Group([(Contains("ECHO", name="format"), 1), (judge("tone", "Polite tone. [[score=9]]"), 2)],
                  pass_rule="score", threshold=0.6, name="weighted", store=store),
            # Three samples of one judge, mean against its threshold; the spread is stored.
            Ensemble(judge("steady", "Is correct. [[scores=6,8,9]]"), samples=3, name="ensemble", store=store),
            # Ask again only when the first score lands within 1 of the threshold.
            Borderline(judge("careful", "Is complete. [[scores=7,5,6,3]]"), margin=1, extra_samples=2,
                       name="borderline", store=store),
        ]
        agent = Agent(name="assistant", id="assistant", telemetry=False, post_hooks=hooks,
                      model=OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed"))
        agent.run("What is the capital of France?")
        agent.run("Sorry, I cannot help with that.")
        judge_calls = server.settings.counts["judge"]

    print(f"{len(store.records)} records from 2 runs, {judge_calls} judge calls")
    for r in store.records:
        score = "-" if r.score is None else f"{r.score:g}"
        print(f"  {r.evaluator:11} {r.status:7} score={score:6} {r.reason}")
        for line in r.details.get("criteria", []):
            print(f"      criterion {line['name']:9} x{line['weight']:g} score={line['score']}  {line['reason']}")
        if "decided_by" in r.details:
            print(f"      decided by {r.details['decided_by']}; not run: {r.details['not_run']}")
        if "spread" in r.details:
            scores = sorted(s["score"] for s in r.details["samples"])
            print(f"      samples {scores} spread {r.details['spread']:g}"
                  + (f" reasked={r.details['reasked']}" if "reasked" in r.details else ""))


if __name__ == "__main__":
    main()
