"""`judgehooks.align_judge`: a real litellm judge over HTTP whose verdicts follow its criteria, people's
labels that it disagrees with, and a reflection model that proposes stricter criteria when it reads
disagreements; kappa is measured on held-out labels only."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import judgehooks
from judgehooks import MemoryStore
from judgehooks.testing import capture_records

pytest.importorskip("gepa")

ORIGINAL = "The answer responds to the question."
STRICT = "STRICT: the answer responds to the question and never hedges; an answer with 'maybe' fails."
_OUTPUT = re.compile(r"<<<OUTPUT-([0-9a-f]+)>>>\n(.*?)\n<<<END-OUTPUT-\1>>>", re.DOTALL)


class Labelling:
    """The judge passes everything unless its criteria say STRICT (then 'maybe' fails); people fail
    every answer that hedges with 'maybe'. The reflection model proposes STRICT criteria when it
    reads a disagreement."""

    def __init__(self, server) -> None:
        self.server = server
        self.reflection_prompts: list[str] = []
        server.configure(handler=self.handle)

    def handle(self, request: dict[str, Any]) -> str | None:
        text = "\n".join(str(m.get("content")) for m in request.get("messages", []))
        if request.get("model") == "reflect":
            self.reflection_prompts.append(text)
            return f"```\n{STRICT}\n```" if "DISAGREES" in text else f"```\n{ORIGINAL}\n```"
        if request.get("model") == "judge":
            found = _OUTPUT.search(text)
            answer = found.group(2) if found else ""
            passed = not ("STRICT" in text and "maybe" in answer)
            return json.dumps({"passed": passed, "reason": "it hedges" if not passed else "it answers",
                               "nonce": found.group(1) if found else ""})
        return None

    def judge(self, **kwargs: Any) -> judgehooks.AgentAsJudgeEval:
        return judgehooks.AgentAsJudgeEval(criteria=ORIGINAL, model="openai/judge", api_base=self.server.base_url,
                                           api_key="test-key", name="answers", retry_backoff=0.01, timeout=10,
                                           **kwargs)

    @staticmethod
    def labels(n: int) -> list[dict[str, Any]]:
        return [{"id": f"l{i}", "input": f"Is {i} a prime number?",
                 "output": f"maybe, {i} could be prime" if i % 2 else f"{i} is {'not ' * (i % 3 == 0)}prime",
                 "passed": i % 2 == 0, "note": "hedging is not an answer" if i % 2 else None} for i in range(n)]


def test_align_judge_raises_kappa_on_held_out_labels(server):
    world = Labelling(server)
    judge = world.judge(store=MemoryStore())
    labels = world.labels(32)
    result = judgehooks.align_judge(judge, labels, reflection_model="openai/reflect",
                                    api_base=server.base_url, api_key="test-key", holdout=0.5, few_shot=2,
                                    max_metric_calls=40, resamples=200)
    held = {r["case"] for r in result.holdout_before}
    people_pass = [item["passed"] for item in labels if item["id"] in held]
    assert result.criteria == STRICT and result.original_criteria == ORIGINAL
    assert result.kappa_before == 0.0 and result.kappa_after == 1.0
    assert result.kappa_before_ci is not None and result.kappa_after_ci == (1.0, 1.0)
    assert result.agreement_before == sum(people_pass) / 16 < 1 and result.agreement_after == 1.0
    assert result.conclusive and result.p_value < 0.05
    assert len(result.examples) == 2 and all("FAILS" in e for e in result.examples)
    inputs = {item["id"]: item["input"] for item in labels}
    assert world.reflection_prompts
    for prompt in world.reflection_prompts:  # held-out labels never reach the reflection model
        assert not [i for i in held if inputs[i] in prompt]
    assert judge.criteria == ORIGINAL  # the judge passed in is unchanged


def test_the_aligned_judge_is_a_new_version_and_its_records_say_so(server):
    world = Labelling(server)
    store = MemoryStore()
    judge = world.judge(store=store)
    result = judgehooks.align_judge(judge, world.labels(12), reflection_model="openai/reflect",
                                    api_base=server.base_url, api_key="test-key", holdout=0.5, few_shot=0,
                                    max_metric_calls=20, resamples=50)
    new = result.evaluator
    assert new.criteria == STRICT and new.evaluator_name == judge.evaluator_name
    assert result.version_before == judge.evaluator_version != result.version_after == new.evaluator_version
    assert not result.conclusive and "too small" in result.note  # 6 held-out labels
    with capture_records() as records:
        new.run(input="Is 9 prime?", output="maybe")
        judge.run(input="Is 9 prime?", output="maybe")
    assert [(r.evaluator, r.evaluator_version, r.status) for r in records] == [
        ("answers", result.version_after, "failed"), ("answers", result.version_before, "passed")]
    assert {r.evaluator_version for r in store.records} == {result.version_before, result.version_after}


def test_labels_are_read_from_the_judges_store(server):
    world = Labelling(server)
    store = MemoryStore()
    judge = world.judge(store=store)
    for item in world.labels(6):
        record = judge.run(input=item["input"], output=item["output"]).records[0]
        judgehooks.label(record.id, passed=item["passed"], by="ann", store=store)
    from judgehooks._optimize.align import labels_in_store

    found = judgehooks._runtime.runtime.call(labels_in_store, store, "answers", None)
    assert sorted((c.input, c.passed) for c in found) == sorted((i["input"], i["passed"]) for i in world.labels(6))
