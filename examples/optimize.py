"""Close the loop: the failures monitoring found become better instructions, checked on held-out cases.

    python examples/optimize.py            # a scripted loopback world: a real agno agent, litellm judge and
                                           # reflection model, whose answers follow their prompts
    python examples/optimize.py --local    # PLUMBING ONLY: the local model (SmolLM2-135M) is the agent, the
                                           # judge and the reflection model

The scripted world: the agent answers in capitals only when its instructions hold the word SHOUT; the
judge passes answers in capitals; the reflection model proposes an instruction with SHOUT once it reads
the judge's reasons for failing. `judgehooks.optimize` finds it on the training cases and measures it
on the held-out ones. With --local a 135M model plays every part: the run shows that the loop works end
to end on a real model (cases run, judged, reflected on, measured), not that such a model improves
instructions; read its numbers as plumbing.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import json
import re
import sys
from typing import Any

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

import judgehooks
from judgehooks import AgentAsJudgeEval, Contains, MemoryStore
from judgehooks.testing import StubLLMServer

ORIGINAL = "You answer questions."
CRITERIA = "The answer is written in capital letters."
_OUTPUT = re.compile(r"<<<OUTPUT-([0-9a-f]+)>>>\n(.*?)\n<<<END-OUTPUT-\1>>>", re.DOTALL)


def scripted(request: dict[str, Any]) -> str | None:
    """The loopback world's three models, each answering from what its prompt says."""
    messages = request.get("messages", [])
    text = "\n".join(str(m.get("content")) for m in messages)
    if request["model"] == "reflect":
        if "FAILED" in text:
            return "```\nYou answer questions. SHOUT: write every answer in capital letters.\n```"
        return "```\n" + ORIGINAL + "\n```"
    if request["model"] == "judge":
        found = _OUTPUT.search(text)
        answer = found.group(2) if found else ""
        passed = answer == answer.upper()
        return json.dumps({"passed": passed, "nonce": found.group(1) if found else "",
                           "reason": "in capitals" if passed else "the answer must be written in capital letters"})
    system = " ".join(str(m.get("content")) for m in messages if m.get("role") == "system")
    question = str(messages[-1].get("content"))
    return question.upper() if "SHOUT" in system else question.lower()


def show(result: judgehooks.OptimizeResult) -> None:
    for c in result.candidates:
        held = "-" if c.holdout_score is None else f"{c.holdout_score:.0%}"
        print(f"  candidate {c.index}: train {c.train_score:.0%}, held-out {held}: {c.text[:70]!r}")
    before = "-" if result.score_before is None else f"{result.score_before:.0%}"
    after = "-" if result.score_after is None else f"{result.score_after:.0%}"
    print(f"held-out pass rate {before} -> {after} on {result.holdout_size} cases "
          f"({result.train_size} to learn from); {result.note}")
    print(f"calls: {result.spend['calls']}, stopped: {result.stopped}")
    print(result.diff() or "(the instructions are unchanged)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local", action="store_true", help="PLUMBING: the local model plays every part")
    args = parser.parse_args(argv)
    questions = [f"Name the capital of country number {i}." for i in range(20)]
    if args.local:
        from judgehooks.local import local_endpoint

        print("PLUMBING: SmolLM2-135M plays the agent, the judge and the reflection model; its scores say "
              "nothing about the method")
        with local_endpoint() as endpoint:
            agent = Agent(model=endpoint.agno_model(max_tokens=24, temperature=0), instructions=ORIGINAL,
                          telemetry=False)
            judge = AgentAsJudgeEval(criteria=CRITERIA, name="capitals", store=MemoryStore(), timeout=120,
                                     temperature=0, litellm_kwargs={"max_tokens": 60}, **endpoint.judge_settings())
            # a check no answer passes, so the search fails cases and the reflection model is asked
            marker = Contains("ANSWER:", name="starts-with-answer")
            result = judgehooks.optimize(agent, [{"input": q} for q in questions[:4]], evaluators=[judge, marker],
                                         # an agno Model as the reflection model, its reply bounded
                                         reflection_model=endpoint.agno_model(max_tokens=120, temperature=0),
                                         max_metric_calls=6, holdout=0.5,  # one try fits: 2 + 1 + 1 + 2
                                         minibatch_size=1, concurrency=2, timeout=120)
            show(result)
        return 0
    with StubLLMServer() as server:
        server.configure(handler=scripted)
        agent = Agent(model=OpenAILike(id="agent", base_url=server.base_url, api_key="k"), instructions=ORIGINAL,
                      telemetry=False)
        judge = AgentAsJudgeEval(criteria=CRITERIA, name="capitals", model="openai/judge",
                                 api_base=server.base_url, api_key="k", store=MemoryStore())
        result = judgehooks.optimize(agent, [{"input": q} for q in questions], evaluators=[judge],
                                     reflection_model="openai/reflect", api_base=server.base_url, api_key="k",
                                     max_metric_calls=40, holdout=0.5)
        show(result)
        print(f"the agent passed in still has its own instructions: {agent.instructions!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
