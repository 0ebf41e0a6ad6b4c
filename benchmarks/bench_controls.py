"""Production controls benchmark: what redaction and spend caps cost.

    python benchmarks/bench_controls.py            # 5 repeats per row
    python benchmarks/bench_controls.py --quick    # 3 repeats, fewer hook calls

Tables, each row repeated (median and range of the repeats):
  1. redaction: `judgehooks.redact.PII` on a 2 KB and a 200 KB answer (prose with a piece of personal
     data every ~1,000 characters, and every ~100), on hostile 200 KB texts built to make backtracking
     patterns slow; beside it agno's `PIIDetectionGuardrail` (which masks an agent's input) and, when
     presidio-analyzer is installed, Presidio's analyzer (its pattern recognizers on a blank spaCy
     pipeline) on the same answers;
  2. the spend-cap check: admitting and charging one call, counted in this process and in Redis
     (a redis-server started here on 127.0.0.1, when one is installed);
  3. the hook: what `post_check` costs the agent's caller with background grading, with redaction
     off and on (`redact=PII`), for a 2 KB and a 200 KB answer;
  4. a streamed run's time to the first content token, over the loopback stub server (its own
     process, the judge answering after `--judge-delay-ms`): agno's plain `run(stream=True)`,
     `judgehooks.stream` without a gate, and `judgehooks.stream` with a gate (which holds the content
     until the judge's verdict), and with a gate whose cheap check lets `checkpoints="sentence"`
     release the first sentence before the verdict. `--only stream` runs this table alone.
Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

sys.path.insert(0, os.path.dirname(__file__))
from _common import stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.guardrails import PIIDetectionGuardrail  # noqa: E402
from agno.run.agent import RunInput, RunOutput  # noqa: E402

import judgehooks  # noqa: E402
from judgehooks import AgentAsJudgeEval, MemoryStore, NotContains, Ordered  # noqa: E402
from judgehooks._grading.spend import LocalLedger, SpendCap  # noqa: E402
from judgehooks.redact import PII, Presidio  # noqa: E402
from judgehooks.testing import FakeJudge, RedisServer  # noqa: E402

WORDS = ("the refund policy allows returns within thirty days of purchase when the receipt is kept and "
         "support answers every request in order").split()
PERSONAL = ("write to alice.smith@example.com", "call +49 30 1234567", "card 4111 1111 1111 1111",
            "iban DE89 3704 0044 0532 0130 00", "key sk-proj-Zq8vN3kLp0RtYw6XbC2dFh")


def answer(size: int, seed: int = 1, every: int = 1_000) -> str:
    """Prose of `size` characters with a piece of personal data about every `every` characters."""
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        piece = rng.choice(PERSONAL) if rng.random() < 7 / every else rng.choice(WORDS)
        parts.append(piece)
        length += len(piece) + 1
    return " ".join(parts)[:size]


HOSTILE = {
    "200 KB 'a'": "a" * 200_000,
    "200 KB '1 1 1 ...'": "1 " * 100_000,
    "200 KB 'a@a@...'": "a@" * 100_000,
    "200 KB 'x@a.a.a...'": "x@" + "a." * 100_000,
    "200 KB 'DE89 DE89 ...'": "DE89 " * 40_000,
    "200 KB 'eyJ' repeated": "eyJ" * 66_667,
}


def spread(samples: list[float]) -> tuple[float, str]:
    return statistics.median(samples), f"{min(samples):.3f}-{max(samples):.3f}"


def timed(fn: Callable[[], object], calls: int) -> float:
    """Wall ms per call of fn()."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) * 1000 / calls


def redaction(repeats: int) -> None:
    small, large = answer(2_000), answer(200_000)
    texts = {"2 KB answer": small, "200 KB answer": large,
             "200 KB, personal data every 100 chars": answer(200_000, every=100), **HOSTILE}
    rows = []
    for name, text in texts.items():
        calls = 200 if len(text) < 10_000 else 3
        med, rng = spread([timed(lambda t=text: PII(t), calls) for _ in range(repeats)])
        rows.append(["judgehooks PII", name, med, rng])
    guardrail = PIIDetectionGuardrail(mask_pii=True)  # agno's: masks the agent's input, before the run

    def agno_mask(text: str) -> None:
        guardrail.check(RunInput(input_content=text))

    agno_texts = {"2 KB answer": small, "200 KB answer": large, "10 KB 'a.a.a...' (hostile)": "a." * 5_000,
                  "20 KB 'a.a.a...' (hostile)": "a." * 10_000}
    for name, text in agno_texts.items():
        calls = 200 if len(text) < 10_000 else 1
        med, rng = spread([timed(lambda t=text: agno_mask(t), calls) for _ in range(repeats)])
        rows.append(["agno PIIDetectionGuardrail (input only)", name, med, rng])
    for name in ("10 KB 'a.a.a...' (hostile)", "20 KB 'a.a.a...' (hostile)"):
        text = agno_texts[name]
        med, rng = spread([timed(lambda t=text: PII(t), 3) for _ in range(repeats)])
        rows.append(["judgehooks PII", name, med, rng])
    try:
        presidio = Presidio(analyzer=_blank_presidio(), entities=["EMAIL_ADDRESS", "CREDIT_CARD", "IBAN_CODE",
                                                                  "PHONE_NUMBER"])
    except ImportError as exc:
        rows.append(["Presidio", f"not run: {exc}", "-", "-"])
    else:
        for name, text in {"2 KB answer": small, "200 KB answer": large}.items():
            calls = 20 if len(text) < 10_000 else 1
            med, rng = spread([timed(lambda t=text: presidio(t), calls) for _ in range(repeats)])
            rows.append(["Presidio (pattern recognizers, blank spaCy)", name, med, rng])
    table("Redaction: ms per text (median of the repeats, range)", ["redactor", "text", "ms median", "ms range"],
          rows)


def _blank_presidio() -> object:
    import spacy
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    engine = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": "blank-en"}])
    engine.nlp = {"en": spacy.blank("en")}
    return AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])


def spend_check(repeats: int, calls: int) -> None:
    rows = []

    async def per_call_us(cap: SpendCap) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            ticket = await cap.admit()
            await cap.charge(ticket, 0.0001)
        return (time.perf_counter() - start) * 1e6 / calls

    def cap(ledger: object, i: int) -> SpendCap:
        return SpendCap(evaluator=f"bench-{i}", model="openai/judge", per="hour", max_cost_usd=1e9, max_calls=10**9,
                        ledger=ledger)  # type: ignore[arg-type]

    med, rng = spread([asyncio.run(per_call_us(cap(LocalLedger(), i))) for i in range(repeats)])
    rows.append(["in this process (default)", med, rng])
    try:
        server = RedisServer().start()
    except FileNotFoundError as exc:
        rows.append([f"Redis: not run ({exc})", "-", "-"])
    else:
        try:
            from redis.asyncio import ConnectionPool

            from judgehooks._grading.redis.spend import RedisLedger

            async def redis_run(i: int) -> float:
                pool = ConnectionPool.from_url(server.url)
                try:
                    return await per_call_us(cap(RedisLedger(pool), i))
                finally:
                    await pool.aclose()

            med, rng = spread([asyncio.run(redis_run(i)) for i in range(repeats)])
            rows.append(["in Redis (judgehooks worker fleets), loopback", med, rng])
        finally:
            server.stop()
    table(f"Spend-cap check: admit + charge one judge call, µs per call ({calls} calls per repeat)",
          ["where the counts live", "µs median", "µs range"], rows)


def hook(repeats: int, calls: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (2_000, 200_000):
            text = answer(size)
            n = calls if size < 10_000 else max(20, calls // 20)
            for label, redact in (("off", None), ("on (PII)", PII)):
                samples = []
                for rep in range(repeats):
                    outbox = os.path.join(tmp, f"{size}-{rep}-{label[:2]}.db")
                    judge = AgentAsJudgeEval(name=f"bench-{size}-{label[:2]}-{rep}", criteria="c",
                                             judge=FakeJudge('{"passed": true, "reason": "ok"}'), store=MemoryStore(),
                                             run_in_background=True, outbox=outbox, redact=redact, max_queue=n + 10)
                    run = RunOutput(run_id="r", agent_id="bench-agent", session_id="s", content=text)
                    ids = iter(range(10**9))

                    def call(judge: AgentAsJudgeEval = judge, run: RunOutput = run, ids: Iterator[int] = ids) -> None:
                        run.run_id = f"run-{next(ids)}"  # a new job each time
                        judge.post_check(run)

                    samples.append(timed(call, n))
                    judgehooks.drain(120)
                rows.append([f"{size // 1000} KB answer", label, *spread(samples)])
    table(f"Hook: ms per post_check seen by the caller, background grading with an outbox ({calls} calls per "
          f"repeat for 2 KB)", ["answer", "redaction", "ms median", "ms range"], rows)


def first_token(repeats: int, runs: int, judge_delay_ms: float) -> None:
    from agno.agent import Agent
    from agno.models.openai.like import OpenAILike
    from agno.run.agent import RunContentEvent

    rows = []
    with stub_server(judge_delay_ms=judge_delay_ms) as stub:
        def agent(*hooks: object) -> Agent:
            return Agent(model=OpenAILike(id="agent", base_url=stub.base_url, api_key="k"), post_hooks=list(hooks),
                         telemetry=False)

        gate = AgentAsJudgeEval(name="bench-stream-gate", criteria="c", model="openai/judge", api_base=stub.base_url,
                                api_key="k", store=MemoryStore(), gate=True)
        checked = Ordered([NotContains("forbidden"), AgentAsJudgeEval(
            name="bench-stream-judge", criteria="c", model="openai/judge", api_base=stub.base_url, api_key="k")],
            name="bench-stream-checked", store=MemoryStore(), gate=True)
        plain, gated, checked_agent = agent(), agent(gate), agent(checked)
        ways: list[tuple[str, Callable[[str], Iterator[object]]]] = [
            ("agno run(stream=True)", lambda q: plain.run(q, stream=True)),
            ("judgehooks.stream, no gate", lambda q: judgehooks.stream(plain, q)),
            ("judgehooks.stream, gate", lambda q: judgehooks.stream(gated, q)),
            ("judgehooks.stream, gate with a cheap check, checkpoints='sentence'",
             lambda q: judgehooks.stream(checked_agent, q, checkpoints="sentence")),
        ]
        for label, way in ways:
            samples = []
            for rep in range(repeats):
                waits = []
                for i in range(runs):
                    start, first = time.perf_counter(), None
                    for event in way(f"Where is my order? It is order {rep}-{i}"):  # to the end: the run completes
                        if first is None and isinstance(event, RunContentEvent) and event.content:
                            first = (time.perf_counter() - start) * 1000
                    if first is not None:
                        waits.append(first)
                samples.append(statistics.median(waits))
            rows.append([label, *spread(samples)])
    table(f"Streamed run: ms to the first content token ({runs} runs per repeat, judge delay {judge_delay_ms:g} ms)",
          ["stream", "ms median", "ms range"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats and fewer calls")
    parser.add_argument("--only", choices=("stream",), help="run one table only")
    parser.add_argument("--judge-delay-ms", type=float, default=200.0, help="the stub judge's delay (table 4)")
    args = parser.parse_args()
    repeats = 3 if args.quick else 5
    print(f"# judgehooks production controls, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    if args.only is None:
        redaction(repeats)
        spend_check(repeats, 500 if args.quick else 2_000)
        hook(repeats, 200 if args.quick else 1_000)
    first_token(repeats, 5 if args.quick else 20, args.judge_delay_ms)


if __name__ == "__main__":
    main()
