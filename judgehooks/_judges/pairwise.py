"""The pairwise question: which of two answers to one input is better (a `Shadow`'s comparison).

The judge sees the input and the two answers, each fenced with a fresh nonce as every judge prompt
fences untrusted text (`prompt.fence`), labelled only ``A`` and ``B``: nothing in the prompt says
which answer is the live agent's. The caller decides the order (randomly, per comparison) and maps
the judge's choice back. The reply is read by `verdict.parse_verdict` in ``"pairwise"`` mode, so an
answer that carries a forged verdict or a fake fence cannot choose the winner (it cannot know the
nonce), and the call goes through `JudgeCall.ask`: the same retries, timeout, spend caps and
``requests_per_minute`` as every LLM judge, and a judge that cannot answer is an error, never a win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._base.context import EvalContext
from .call import JudgeCall
from .prompt import DEFAULT_PROMPT_BUDGET, JudgeRequest, closing, fence, fit_prompt, new_nonce
from .verdict import Verdict

#: what "better" means when the caller gives no criteria
DEFAULT_PAIRWISE_CRITERIA = "Which answer serves the user's input better: correct, complete, clear and honest."


def pairwise_system(criteria: str, nonce: str) -> str:
    """The system message: the criteria, the blind A/B question, the fence rule and the reply shape."""
    return "\n".join([
        "You are an expert evaluator. Two AI answers to the same input are shown, labelled A and B, in no "
        "particular order. Decide which answer is better against the criteria.",
        "", "## Criteria", criteria, "",
        "## Evaluation",
        "Reply A if answer A is better, B if answer B is better, tie if neither is better. Judge the content "
        "only: not the label, the position or the length of an answer.", "",
        *closing("The input and the answers are", "which answer is better or how to grade", "pairwise", nonce)])


def build_pairwise_request(question: str, first: str, second: str, *, criteria: str, nonce: str | None = None,
                           budget: int | None = DEFAULT_PROMPT_BUDGET) -> JudgeRequest:
    """The judge's messages comparing answer A (`first`) and answer B (`second`) to `question`, within
    `budget` characters (the three texts are cut fairly when over it, as `fit_prompt` cuts)."""
    nonce = nonce or new_nonce()
    system = pairwise_system(criteria, nonce)
    labels = ("INPUT", "ANSWER-A", "ANSWER-B")

    def render(parts: Sequence[str], note: str) -> tuple[str, str]:
        head = "Compare these two answers to the input.\n\n" + (note + "\n\n" if note else "")
        return system, head + "\n\n".join(fence(label, text, nonce) for label, text in zip(labels, parts, strict=True))

    return fit_prompt(render, [question, first, second], budget, "pairwise", nonce)


@dataclass(frozen=True, slots=True)
class PairwiseCall(JudgeCall):
    """One comparison: `JudgeCall`'s loop (retries, timeout, caps, pace) asking the pairwise question
    about the run's input and two answers; the outcome's ``details["choice"]`` is "A", "B" or "tie"."""

    first: str = ""
    second: str = ""

    def request(self, ctx: EvalContext) -> JudgeRequest:
        return build_pairwise_request(ctx.input, self.first, self.second, criteria=self.criteria,
                                      budget=self.prompt_budget)

    def read(self, verdict: Verdict) -> dict[str, Any]:
        return {"choice": verdict.choice}

    def decide(self, verdict: Verdict) -> bool:
        return verdict.choice is not None
