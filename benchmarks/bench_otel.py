"""OpenTelemetry benchmark: what the hook costs with a tracer provider configured against without one.

    python benchmarks/bench_otel.py            # 3 repeats of 2,000 runs per row (~2 minutes)
    python benchmarks/bench_otel.py --quick    # 3 repeats of 500 runs
    python benchmarks/bench_otel.py --pieces   # the inline path's pieces, timed in one process

OpenTelemetry's tracer provider can be set once per process, so each measurement is a fresh child
process, the three kinds alternated in the same run:

- "no provider": opentelemetry imported, no tracer provider set (judgehooks emits nothing);
- "SDK, judgehooks silent": the SDK's TracerProvider (BatchSpanProcessor, an exporter that discards),
  judgehooks' event emission switched off in the benchmark process: the application's own tracing;
- "SDK + events": the same, with judgehooks emitting its events. The extra that judgehooks adds is
  this minus the previous one; beside it, the difference to "no provider" (the SDK's own spans too).

Every call happens inside an open span, as an agno run instrumented by openinference is. Columns: the
median time the caller waits in `post_check`, and the process CPU per run over the whole batch,
background grading and emission included. Rows: the background hook (snapshot + hand-off; the event
is emitted later, on the judgehooks loop) and an inline evaluation with an in-process FakeJudge (the
event is added to the run's span on the hook path). Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

GOAL_MS = 0.05


KINDS = ("no provider", "SDK, judgehooks silent", "SDK + events")


def install_discarding_provider() -> None:
    """The OTel SDK's tracer provider, batching spans to an exporter that discards them."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    trace.set_tracer_provider(provider)


def child(mode: str, kind: str, n: int, base_url: str) -> dict[str, float]:
    """One measurement in this (fresh) process: median ms the caller waits per post_check call, and
    process CPU ms per run (hook, grading and emission)."""
    from agno.agent import Agent
    from agno.models.openai.like import OpenAILike
    from opentelemetry import trace

    import judgehooks
    from judgehooks import AgentAsJudgeEval, MemoryStore
    from judgehooks.testing import FakeJudge

    if kind != "no provider":
        install_discarding_provider()
    if kind == "SDK, judgehooks silent":
        from judgehooks._grading import tracing

        tracing._api = lambda: None  # the benchmark's switch: judgehooks sees no provider
    tracer = trace.get_tracer("bench")
    agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="bench"), id="bench-agent",
                  telemetry=False)
    run_output = agent.run("What is the capital of France?")
    evaluator = AgentAsJudgeEval(criteria="The answer is right.", judge=FakeJudge('{"passed": true, "reason": "ok"}'),
                                 store=MemoryStore(), run_in_background=mode == "background", outbox=False,
                                 max_queue=n + 1000)

    def calls(k: int, offset: int) -> list[float]:
        waits = []
        for i in range(k):
            run_output.run_id = f"run-{offset + i}"
            with tracer.start_as_current_span("bench-agent.run"):
                started = time.perf_counter()
                evaluator.post_check(run_output, agent=agent)
                waits.append(time.perf_counter() - started)
        return waits

    calls(200, 0)  # warm up: imports, the judgehooks loop, the dispatcher
    judgehooks.drain(60)
    cpu = time.process_time()
    waits = calls(n, 10_000)
    judgehooks.drain(60)
    return {"wall_ms": statistics.median(waits) * 1000, "cpu_ms": (time.process_time() - cpu) * 1000 / n}


def pieces(repeats: int = 9, n: int = 1000) -> None:
    """The event's pieces in this process with the SDK's provider: judgehooks' own part of the inline
    path, the whole inline addition (with the SDK's add_event and the run span's end), and a background
    record's short span. Minimum and median of `repeats` interleaved rounds of `n` calls, in us."""
    import timeit

    from opentelemetry import trace

    from judgehooks._base.record import EvalRecord
    from judgehooks._grading import tracing

    install_discarding_provider()
    tracer = trace.get_tracer("bench")

    def record(ids: tuple[str, str] | tuple[None, None]) -> EvalRecord:
        return EvalRecord(id="r", status="passed", evaluator="helpful", mode="binary", passed=True, reason="ok",
                          run_id="run-1", trace_id=ids[0], span_id=ids[1])

    deferred = record(("0" * 31 + "1", "0" * 15 + "1"))

    def run_span_only() -> None:
        with tracer.start_as_current_span("run"):
            record((None, None))

    def inline() -> None:
        with tracer.start_as_current_span("run"):
            found = tracing.current_span()
            assert found is not None
            with tracing.holding(found):
                tracing.emit([record(found[:2])])

    def own_part() -> None:
        found = tracing.current_span()
        with tracing.holding(found):
            tracing._api()
            tracing.event_attributes(deferred)

    found: dict[str, list[float]] = {}
    for _ in range(repeats):
        for name, fn in (("run span + record, no event", run_span_only), ("the same + judgehooks' event", inline),
                         ("a background record's event (short span)", lambda: tracing.emit([deferred]))):
            found.setdefault(name, []).append(timeit.timeit(fn, number=n) / n * 1e6)
        with tracer.start_as_current_span("run"):
            found.setdefault("judgehooks' own part (no SDK event)", []).append(
                timeit.timeit(own_part, number=n) / n * 1e6)
    table(f"The event's pieces (us per call; min and median of {repeats} rounds of {n})", ["piece", "min", "median"],
          [[name, f"{min(v):.1f}", f"{statistics.median(v):.1f}"] for name, v in found.items()])


def measure(mode: str, kind: str, n: int, base_url: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--child", mode, kind, str(n), base_url],
                          capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.4f} ({min(values):.4f}-{max(values):.4f})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=4, metavar=("MODE", "KIND", "N", "BASE_URL"))
    parser.add_argument("--pieces", action="store_true", help="time the inline path's pieces in this process")
    args = parser.parse_args()
    if args.pieces:
        pieces()
        return
    if args.child:
        mode, kind, n, base_url = args.child
        print(json.dumps(child(mode, kind, int(n), base_url)))
        return
    n = 500 if args.quick else 2000
    rows = []
    with stub_server() as stub:
        for mode in ("background", "inline"):
            found: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
            for _ in range(args.repeats):  # alternated, so drift on a shared machine hits all alike
                for kind in KINDS:
                    found[kind].append(measure(mode, kind, n, stub.base_url))
            for key, label in (("wall_ms", "caller waits (median), ms"), ("cpu_ms", "process CPU per run, ms")):
                none, silent, events = ([m[key] for m in found[kind]] for kind in KINDS)
                ours = [b - a for a, b in zip(silent, events, strict=True)]
                total = [b - a for a, b in zip(none, events, strict=True)]
                rows.append([f"{mode}: {label}", spread(none), spread(silent), spread(events), spread(ours),
                             "yes" if statistics.median(ours) < GOAL_MS else "no", spread(total)])
    table(f"Hook cost with OpenTelemetry (median (min-max) of {args.repeats} processes x {n} runs each; "
          f"goal: judgehooks adds under {GOAL_MS} ms)",
          ["path", *KINDS, "judgehooks' extra", f"< {GOAL_MS} ms", "extra vs no provider"], rows)

if __name__ == "__main__":
    main()
