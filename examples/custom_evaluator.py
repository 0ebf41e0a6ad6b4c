"""Your own evaluator: a small class or a decorated function, and everything else for free.

    python examples/custom_evaluator.py

Both evaluators below get agno's hook shells (run and arun), records in SQLite, on_fail
callbacks, sampling and background grading with a durable outbox. Sync code runs on a worker
thread, so it never blocks the event loop. The agent's model is the scripted loopback server
from `judgehooks.testing` (no key, no network).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import tempfile

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

import judgehooks
from judgehooks import EvalContext, EvalRecord, Evaluator, Outcome, SQLiteStore, evaluator
from judgehooks.testing import StubLLMServer


class ReadingLevel(Evaluator):
    """Average word length as a rough reading-level score: 1.0 plain, 0.0 dense."""

    needs_tools = False  # reads only the text: skip snapshotting tool calls

    def __init__(self, max_word_length: float = 6.0, **hook):
        if max_word_length <= 0:
            raise ValueError(f"max_word_length must be > 0, got {max_word_length!r}")
        self.max_word_length = max_word_length
        super().__init__(**hook)  # name, threshold, store, on_fail, run_in_background, sample_rate, ...

    def evaluate(self, ctx: EvalContext) -> Outcome:
        words = ctx.output.split() or [""]
        average = sum(len(w) for w in words) / len(words)
        score = max(0.0, 1.0 - max(0.0, average - 4) / (self.max_word_length - 4 or 1))
        return Outcome(score=round(score, 3), reason=f"average word length {average:.1f}",
                       details={"words": len(words), "average_length": round(average, 2)})


def alert(record: EvalRecord) -> None:
    print(f"  ALERT {record.evaluator}: {record.reason} (run {record.run_id[:8]})")


def main() -> None:
    tmp = tempfile.mkdtemp()
    store = SQLiteStore(os.path.join(tmp, "custom.db"))

    @evaluator(name="no-shouting", store=store, on_fail=alert, run_in_background=True, tool_calls=False)
    async def no_shouting(ctx: EvalContext) -> dict:
        shouted = [w for w in ctx.output.split() if len(w) > 2 and w.isupper() and w.isalpha()]
        return {"passed": not shouted, "reason": f"shouted {shouted}" if shouted else "calm",
                "details": {"shouted": shouted}}

    reading = ReadingLevel(name="reading-level", threshold=0.5, store=store, on_fail=alert, run_in_background=True)

    with StubLLMServer() as server:
        agent = Agent(name="writer", id="writer", post_hooks=[reading, no_shouting], telemetry=False,
                      model=OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed"))
        agent.run("[[raw]] The cat sat on the mat.")
        agent.run("[[raw]] Notwithstanding institutional considerations, comprehensive reorganisation commences.")

        async def concurrent() -> None:
            await asyncio.gather(agent.arun("[[raw]] Please STOP now."), agent.arun("[[raw]] All good here."))

        asyncio.run(concurrent())
        judgehooks.drain(30)  # background verdicts land after the runs returned

    records = store.query_sync(agent_id="writer")
    print(f"{len(records)} records in {store.path}")
    for r in sorted(records, key=lambda r: (r.evaluator, r.input)):
        score = "-" if r.score is None else f"{r.score:g}"
        print(f"  {r.evaluator:13} {r.status:7} score={score:5} {r.output[:45]:45} {r.details}")


if __name__ == "__main__":
    main()
