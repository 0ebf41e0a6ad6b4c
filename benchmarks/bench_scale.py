"""Scale benchmark: memory under a deep queue and many open sessions, and grading at 256 in flight.

    python benchmarks/bench_scale.py            # 3 repeats per row (~25 min)
    python benchmarks/bench_scale.py --quick    # 1 repeat of the deep queue, fewer evaluations
    python benchmarks/bench_scale.py --only memory|sessions|rate|cpu|profile
    (cpu: the rate table's own rows and the CPU split, without the peers)

Tables (each row repeated: the median and the range of the repeats; charts of the repeats go to
docs/images/benchmarks/):
1. RSS of a fresh process holding 1,000 and 100,000 queued background evaluations (outbox on; the
   judge never answers within the run, so every job stays queued). Goal: 100,000 at most 2x 1,000.
   Beside it, the process's CPU per second while they wait (the outbox upkeep's once-a-second round).
   Neither peer has a queue: agno grades inline (the run waits), pydantic-evals drops what exceeds
   `max_concurrency`, so the row has no peer beside it.
2. A `SessionJudge` with 10,000 open sessions: turns per second on the hook path and RSS, at 100 and
   at 10,000 open sessions. Neither agno nor pydantic-evals grades conversations, so no peer.
3. Sustained background grading at 256 in flight, 200 ms judge, outbox on, beside agno (256
   concurrent `async_post_check`) and pydantic-evals (`OnlineEvaluator(max_concurrency=256)`),
   each grader in a fresh process of its own, in turn each repeat; the ceiling 256 in flight allow
   is 1,280/s. Beside it, the CPU per evaluation split: ours (this
   process and the judge helper process it sends judge calls to) against the bare fast judge client
   alone making the same calls at 256 concurrency against the same stub (no hook, no store, no
   outbox): our own CPU per evaluation is the total less the client's. And the loopback model
   server's own CPU, which shares the two cores with whoever grades. Then this process's CPU by
   thread (thread CPU from /proc, no profiler; garbage collection timed with gc.callbacks).
4. Where our own CPU goes per evaluation at 256 in flight (cProfile on the judgehooks loop thread
   and on the submitting thread): the top functions by own time, in microseconds per evaluation.
Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _charts import strip_chart  # noqa: E402
from _common import StubProcess, process_cpu_s, spread, stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

CRITERIA = "The answer echoes the question."
HERE = os.path.abspath(__file__)


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set of this process, MB."""
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) / 1024
    return found.get("VmRSS", float("nan")), found.get("VmHWM", float("nan"))


def _sample(base_url: str):
    from agno.agent import Agent
    from agno.models.openai.like import OpenAILike

    agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="bench"), id="bench-agent", telemetry=False)
    return agent, agent.run("What is the capital of France?")


# ---- children: one fresh process per measurement ---------------------------------------------------------

def child_queue(base_url: str, tmp: str, n: int) -> dict[str, float]:
    """`n` background evaluations queued behind a judge that does not answer within the run."""
    import gc

    import judgehooks

    agent, run_output = _sample(base_url)
    evaluator = judgehooks.AgentAsJudgeEval(
        criteria=CRITERIA, name=f"queue-{n}", model="openai/judge", api_base=base_url, api_key="bench",
        store=judgehooks.SQLiteStore(f"{tmp}/queue-{n}.db"), run_in_background=True,
        outbox=f"{tmp}/queue-{n}.outbox.db", max_queue=max(n, 1000) + 100, max_concurrency=1, timeout=3600)
    for i in range(20):  # warm up: tables, the judge client, the loop; these stay queued too
        run_output.run_id = f"warm-{i}"
        evaluator.post_check(run_output, agent=agent)
    time.sleep(1.0)
    gc.collect()
    before, _ = rss_mb()
    start = time.perf_counter()
    for i in range(n):
        run_output.run_id = f"run-{i}"
        evaluator.post_check(run_output, agent=agent)
    submitted = time.perf_counter() - start
    time.sleep(1.0)
    gc.collect()
    after, peak = rss_mb()
    cpu = time.process_time()  # nothing to grade: what the waiting costs (the outbox upkeep, once a second)
    time.sleep(IDLE_S)
    idle = (time.process_time() - cpu) * 1000 / IDLE_S
    stats = evaluator.stats()
    return {"before": before, "after": after, "peak": peak, "submit_s": submitted, "queued": stats["queue_depth"],
            "dropped": stats.get("dropped", 0), "queued_mb": stats["queued_bytes"] / 2**20, "idle_cpu": idle}


IDLE_S = 3.0  # seconds the queue waits with nothing graded, for its CPU per second


def child_sessions(base_url: str, tmp: str, sessions: int) -> dict[str, float]:
    """A SessionJudge with `sessions` open sessions (never due in the run): hook time and RSS."""
    import gc

    import judgehooks

    agent, run_output = _sample(base_url)
    judge = judgehooks.SessionJudge(CRITERIA, name="sessions", model="openai/judge", api_base=base_url,
                                    api_key="bench", store=judgehooks.SQLiteStore(f"{tmp}/sessions.db"),
                                    outbox=f"{tmp}/sessions.outbox.db", idle_after=3600)

    def turns(prefix: str, count: int, open_sessions: int) -> float:
        start = time.perf_counter()
        for i in range(count):
            run_output.run_id, run_output.session_id = f"{prefix}-{i}", f"s{i % open_sessions}"
            judge.post_check(run_output, agent=agent)
        return count / (time.perf_counter() - start)

    turns("warm", 50, 50)
    gc.collect()
    base, _ = rss_mb()
    small_rate = turns("small", 2000, 100)  # 100 open sessions
    gc.collect()
    small_rss, _ = rss_mb()
    turns("open", sessions, sessions)  # one turn each: all open now
    large_rate = turns("large", 2000, sessions)  # a further turn in 2,000 of them
    gc.collect()
    large_rss, peak = rss_mb()
    return {"base": base, "small_rate": small_rate, "small_rss": small_rss, "large_rate": large_rate,
            "large_rss": large_rss, "peak": peak}


def child_ours(base_url: str, tmp: str, n: int) -> dict[str, float]:
    """Our rate row in a fresh process: (evaluations/s, lost, CPU ms per evaluation here and in the
    judge helper process)."""
    rate, lost, cpu, helper, split = ours_rate(base_url, tmp, n, f"rate256-{os.getpid()}")
    return {"rate": rate, "lost": lost, "cpu_ms": cpu, "helper_ms": helper, **split}


def child_agno(base_url: str, tmp: str, n: int) -> dict[str, float]:
    from bench_peers import agno_rate

    return {"rate": asyncio.run(agno_rate(base_url, tmp, n, in_flight=256))}


def child_pydantic_evals(base_url: str, tmp: str, n: int) -> dict[str, float]:
    from bench_peers import pydantic_evals_rate

    return {"rate": asyncio.run(pydantic_evals_rate(base_url, n, in_flight=256))}


def _child(kind: str, base_url: str, tmp: str, n: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, HERE, "--child", kind, base_url, tmp, str(n)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- 1. the deep queue ------------------------------------------------------------------------------------

def deep_queue(base_url: str, tmp: str, repeats: int, sizes: tuple[int, ...]) -> None:
    results: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    for r in range(repeats):
        for n in sizes:  # interleaved: a busy moment falls on both sizes alike
            results[n].append(_child("queue", base_url, f"{tmp}", n))
            print(f"(queue {n:,}, repeat {r + 1}: {results[n][-1]})", flush=True)
    rows = []
    small = statistics.median(x["after"] for x in results[sizes[0]])
    for n in sizes:
        got = results[n]
        after = [x["after"] for x in got]
        growth = [x["after"] - x["before"] for x in got]
        per_job = [1024 * (x["after"] - x["before"]) / n for x in got]
        rows.append([f"judgehooks background, outbox on, {n:,} queued", *spread(after), statistics.median(growth),
                     statistics.median(per_job), f"{statistics.median(after) / small:.2f}x",
                     statistics.median(x["submit_s"] for x in got),
                     statistics.median(x["idle_cpu"] for x in got)])
    table(f"RSS with queued background evaluations, MB (fresh process each; {repeats} repeats; goal: "
          f"{sizes[-1]:,} at most 2x {sizes[0]:,}; no peer has a queue)",
          ["process", "median RSS MB", "range", "growth MB", "KB per job", f"x {sizes[0]:,} queued",
           "submit s", f"CPU ms/s while they wait ({IDLE_S:g} s)"], rows)
    strip_chart("scale-queue-rss", "RSS with queued background evaluations (outbox on)", "MB, lower is better",
                {f"judgehooks, {n:,} queued": [x["after"] for x in results[n]] for n in sizes})


# ---- 2. open sessions -------------------------------------------------------------------------------------

def open_sessions(base_url: str, tmp: str, repeats: int, sessions: int) -> None:
    got = [_child("sessions", base_url, tmp, sessions) for _ in range(repeats)]
    rows = [
        ["SessionJudge, 100 open sessions", *spread([x["small_rate"] for x in got]),
         *spread([x["small_rss"] for x in got])],
        [f"SessionJudge, {sessions:,} open sessions", *spread([x["large_rate"] for x in got]),
         *spread([x["large_rss"] for x in got])],
    ]
    table(f"SessionJudge hook path: turns per second and RSS ({repeats} fresh processes; no peer grades "
          "conversations)", ["sessions", "median turns/s", "range", "median RSS MB", "range"], rows)
    strip_chart("scale-sessions-rate", "SessionJudge hook path, turns per second", "turns/s, higher is better",
                {"judgehooks, 100 open sessions": [x["small_rate"] for x in got],
                 f"judgehooks, {sessions:,} open sessions": [x["large_rate"] for x in got]})


# ---- 3. 256 in flight -------------------------------------------------------------------------------------

def thread_cpu_s() -> dict[str, float]:
    """CPU seconds (user + system) of each live thread of this process, by role (threads of one role
    summed), from /proc: where this process's CPU goes, with no profiler's overhead."""
    import threading

    roles = {"MainThread": "the hook (post_check on the submitting thread)",
             "judgehooks-loop": "the judgehooks event loop (grading, records, store batches)",
             "judgehooks-judgeproc-reader": "the judge helper's reply reader"}
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        try:
            with open(f"/proc/self/task/{thread.native_id}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        role = roles.get(thread.name, "worker threads (store writes, outbox rows)")
        found[role] = found.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


THREAD_ROWS = ("the hook (post_check on the submitting thread)",
               "the judgehooks event loop (grading, records, store batches)",
               "worker threads (store writes, outbox rows)", "the judge helper's reply reader")


def helper_cpu_s() -> float:
    """CPU seconds (user + system) of the live judge helper processes (`judge_process`): their CPU
    is not in this process's `time.process_time()`."""
    from judgehooks._judges import process

    return sum(process_cpu_s(child.proc.pid) for pool in list(process._children.values()) for child in pool)


def child_client(base_url: str, tmp: str, n: int, in_flight: int = 256) -> dict[str, float]:
    """Process CPU ms per call of the bare fast judge client (`LiteLLMJudge` through the OpenAI SDK, as
    the helper process runs it) making `n` calls, `in_flight` at a time, against the same stub: no
    hook, no outbox, no store, no helper process. The same request every call (built once). Run in a
    fresh process, as the helper process is one: not in a process whose heap the grading grew."""
    from judgehooks._hooks.snapshot import snapshot_run
    from judgehooks._judges.litellm import LiteLLMJudge
    from judgehooks._judges.prompt import build_request

    agent, run_output = _sample(base_url)
    judge = LiteLLMJudge("openai/judge", api_base=base_url, api_key="bench")
    assert judge.route is not None, "the bare client row measures the fast judge client"
    request = build_request(snapshot_run(run_output, agent=agent), criteria=CRITERIA, mode="binary")

    async def calls(count: int) -> float:
        slots = asyncio.Semaphore(in_flight)

        async def one() -> None:
            async with slots:
                await judge.complete(request)

        start = time.process_time()
        async with asyncio.TaskGroup() as tg:
            for _ in range(count):
                tg.create_task(one())
        return time.process_time() - start

    async def run() -> float:
        await calls(50)  # warm up, as the evaluator's row does
        return await calls(n)

    return {"cpu_ms": asyncio.run(run()) * 1000 / n}


def ours_rate(base_url: str, tmp: str, n: int, name: str,
              profile: bool = False) -> tuple[float, int, float, float, dict[str, float]]:
    """(evaluations/s, lost, CPU ms per evaluation in this process, and in the judge helper process,
    and this process's per evaluation by thread) for `n` runs submitted at once."""
    import judgehooks
    from judgehooks._runtime import runtime

    agent, run_output = _sample(base_url)
    evaluator = judgehooks.AgentAsJudgeEval(
        criteria=CRITERIA, name=name, model="openai/judge", api_base=base_url, api_key="bench",
        store=judgehooks.SQLiteStore(f"{tmp}/{name}.db"), run_in_background=True, outbox=f"{tmp}/{name}.outbox.db",
        max_concurrency=256, max_queue=n + 100)
    for i in range(50):  # warm up: tables, connections, the loop
        run_output.run_id = f"{name}-warm-{i}"
        evaluator.post_check(run_output, agent=agent)
    judgehooks.drain(600)
    profilers = (cProfile.Profile(), cProfile.Profile()) if profile else None
    if profilers is not None:
        async def on_loop() -> None:
            profilers[1].enable()  # the judgehooks loop's thread

        runtime.call(on_loop)
        profilers[0].enable()  # the submitting thread: the hook path
    collecting = [0.0, 0.0]  # garbage collection: CPU seconds in all, and when the current one started

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[1] = time.thread_time()
        else:
            collecting[0] += time.thread_time() - collecting[1]

    gc.callbacks.append(timed)
    threads = thread_cpu_s()
    helper, cpu, start = helper_cpu_s(), time.process_time(), time.perf_counter()
    for i in range(n):
        run_output.run_id = f"{name}-{i}"
        evaluator.post_check(run_output, agent=agent)
    judgehooks.drain(3600)
    elapsed = time.perf_counter() - start
    cpu, helper = time.process_time() - cpu, helper_cpu_s() - helper
    gc.callbacks.remove(timed)
    after = thread_cpu_s()
    split = {role: (after.get(role, 0.0) - threads.get(role, 0.0)) * 1000 / n for role in THREAD_ROWS}
    split["of which garbage collection (any thread)"] = collecting[0] * 1000 / n
    if profilers is not None:
        profilers[0].disable()

        async def off_loop() -> None:
            profilers[1].disable()

        runtime.call(off_loop)
        _print_profile(profilers, n)
    records = evaluator.store.query_sync(evaluator=evaluator.evaluator, limit=None)
    graded = sum(1 for r in records if r.status in ("passed", "failed") and not r.run_id.startswith(f"{name}-warm"))
    return n / elapsed, n - graded, cpu * 1000 / n, helper * 1000 / n, split


def _print_profile(profilers: tuple[cProfile.Profile, cProfile.Profile], n: int, top: int = 25) -> None:
    stats = pstats.Stats(profilers[0], stream=io.StringIO())
    stats.add(profilers[1])
    total = sum(entry[2] for entry in stats.stats.values())  # type: ignore[attr-defined]
    rows = []
    for (file, line, func), (_, calls, own, cumulative, _) in sorted(
            stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]:  # type: ignore[attr-defined]
        where = file if file == "~" else "/".join(file.split("/")[-2:])
        rows.append([f"{where}:{line}({func})", f"{calls / n:.2f}", 1e6 * own / n, 1e6 * cumulative / n])
    table(f"Where the CPU goes at 256 in flight: top {top} functions by own time (cProfile on both threads; "
          f"{n:,} evaluations; profiled total {1e3 * total / n:.2f} ms per evaluation, with cProfile's overhead)",
          ["function", "calls per evaluation", "own us per evaluation", "cumulative us per evaluation"], rows)


def rate_256(server: StubProcess, tmp: str, n: int, repeats: int, peers: bool = True) -> None:
    """The rate table beside the peers (`peers=False`, `--only cpu`: only our rows and the CPU split).
    Every grader runs in a fresh process of its own, in turn each repeat: no grader inherits another's
    heap, threads or connections."""
    base_url = server.base_url
    agno, pe, ours, lost, cpu, helper, client, stub = [], [], [], 0, [], [], [], []
    threads: dict[str, list[float]] = {}
    for _ in range(repeats):
        if peers:
            agno.append(_child("agno", base_url, tmp, n)["rate"])
            pe.append(_child("pydantic_evals", base_url, tmp, n)["rate"])
        before = server.cpu_s()
        result = _child("ours", base_url, tmp, n)
        stub.append((server.cpu_s() - before) * 1000 / n)  # includes the child's 50 warm-up calls: an upper bound
        ours.append(result["rate"])
        lost += int(result["lost"])
        cpu.append(result["cpu_ms"])
        helper.append(result["helper_ms"])
        for role in (*THREAD_ROWS, "of which garbage collection (any thread)"):
            threads.setdefault(role, []).append(result[role])
        client.append(_child("client", base_url, tmp, n)["cpu_ms"])
    total = [c + h for c, h in zip(cpu, helper, strict=True)]
    own = [t - c for t, c in zip(total, client, strict=True)]
    base = statistics.median(agno) if peers else float("nan")
    labels = ("agno AgentAsJudgeEval, 256 concurrent async_post_check",
              "pydantic-evals OnlineEvaluator(max_concurrency=256)",
              "judgehooks background, max_concurrency=256, outbox on")
    rows = [[labels[0], n, *spread(agno), "1.0x", "-", "inline: the runs wait"],
            [labels[1], n, *spread(pe), f"{statistics.median(pe) / base:.1f}x", "-", "no store, nothing persisted"],
            ] if peers else []
    rows.append([labels[2], n, *spread(ours), f"{statistics.median(ours) / base:.1f}x" if peers else "-", lost,
                 f"{statistics.median(total):.2f} ms CPU/evaluation, {statistics.median(own):.2f} ms our own"])
    table(f"Sustained rate, 200 ms judge, 256 in flight (evals/s; {repeats} repeats; ceiling 1,280/s; goal 600/s)",
          ["grader", "evaluations/repeat", "median evals/s", "range", "x agno", "lost", "note"], rows)
    table(f"CPU per evaluation at 256 in flight, ms (process CPU; {repeats} repeats, each the same {n:,} "
          "evaluations; our own = total - the bare client's)",
          ["CPU", "median ms/evaluation", "range"],
          [["total: this process + the judge helper process", *spread(total)],
           ["  this process (hook, outbox, grading, store writes)", *spread(cpu)],
           ["  the judge helper process (the client, its pipe)", *spread(helper)],
           ["bare fast judge client alone (fresh process, same stub, 256 concurrent)", *spread(client)],
           ["our own = total - bare client", *spread(own)],
           ["the loopback model server (not ours; every grader's calls cost it the same)", *spread(stub)],
           ["the machine: total + the loopback server (2 cores give 2,000 ms/s)",
            *spread([t + s for t, s in zip(total, stub, strict=True)])]])
    table(f"Where this process's CPU goes at 256 in flight, ms per evaluation (thread CPU from /proc; {repeats} "
          "repeats; no profiler)", ["thread", "median ms/evaluation", "range"],
          [[role, *spread(values)] for role, values in threads.items()])
    strip_chart("scale-cpu-256", "CPU per evaluation at 256 in flight, 200 ms judge",
                "ms per evaluation, lower is better",
                {"judgehooks total (this process + judge helper)": total, "  this process": cpu,
                 "  judge helper process": helper, "bare fast judge client alone": client,
                 "judgehooks' own (total - bare client)": own})
    if peers:
        strip_chart("scale-rate-256", "Sustained grading, 200 ms judge, 256 in flight",
                    "evaluations/s, higher is better", dict(zip(labels, (agno, pe, ours), strict=True)))


CHILDREN = {"queue": child_queue, "sessions": child_sessions, "client": child_client, "ours": child_ours,
            "agno": child_agno, "pydantic_evals": child_pydantic_evals}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, base_url, tmp, n = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
        result = CHILDREN[kind](base_url, tmp, n)
        print(json.dumps(result), flush=True)
        os._exit(0)  # the queued jobs stay in the outbox; no exit drain behind a judge that never answers
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("memory", "sessions", "rate", "cpu", "profile"))
    parser.add_argument("--n", type=int, help="evaluations per rate repeat (default 10,000; --quick 3,000)")
    args = parser.parse_args()
    import judgehooks

    print(f"judgehooks {judgehooks.__version__}; cores={os.cpu_count()}; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "memory"):
            with stub_server(3_600_000) as server:  # a judge that does not answer within the run
                deep_queue(server.base_url, tmp, 1 if args.quick else args.repeats, (1_000, 100_000))
        if args.only in (None, "sessions"):
            with stub_server(0) as server:
                open_sessions(server.base_url, tmp, args.repeats, 10_000)
        if args.only in (None, "rate", "cpu", "profile"):
            with stub_server(200) as server:
                n = args.n or (3_000 if args.quick else 10_000)
                if args.only != "profile":
                    rate_256(server, tmp, n, args.repeats, peers=args.only != "cpu")
                if args.only != "cpu":
                    ours_rate(server.base_url, tmp, n, "profiled", profile=True)  # in this process: its profile


if __name__ == "__main__":
    main()
