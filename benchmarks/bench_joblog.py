"""The job log's two implementations side by side in one run (issue 40, item 1): `JournalLog`, the
dispatcher's default (a put is one line appended to this process's journal file), and `Outbox` (a
put is one SQLite row). Each round runs one fresh process per job log, in turn, alternating which
goes first; the judge server is a process of its own.

    python benchmarks/bench_joblog.py               # 8 rounds
    python benchmarks/bench_joblog.py --rounds 3

Rows: the latency the hook adds to `run()` and to `arun()` (500 ms judge, 100 runs/s: per process the
median of 100 runs, averaged over 3 repeats; the rows give the median and range of the rounds), and
one put alone (3,000 puts of the same job in a quiet process, median). The issue keeps the journal
if it is worth at least 15% on the hook's added latency or the 256-in-flight rate
(`bench_scale.py --only rate`). Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import spread, stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = os.path.abspath(__file__)
KINDS = ("JournalLog", "Outbox")


def _use(kind: str) -> None:
    """Make `kind` the job log every dispatcher of this process gets."""
    from judgehooks._hooks import settings

    if kind == "Outbox":
        settings.JournalLog = lambda outbox: outbox  # type: ignore[assignment,misc]


def child(kind: str, base_url: str, tmp: str, n: int = 100, repeats: int = 3) -> dict[str, float]:
    _use(kind)
    os.makedirs(tmp, exist_ok=True)
    from bench_peers import async_hook_ms, hook_ms, ours, sample

    import judgehooks

    agent, run_output = sample(base_url)
    evaluator = ours(base_url, tmp, kind, max_concurrency=64)
    assert type(evaluator._shell.wiring.dispatcher.outbox).__name__ == kind
    for i in range(50):  # warm up: tables, the judge client, the loop
        run_output.run_id = f"warm-{i}"
        evaluator.post_check(run_output, agent=agent)
    judgehooks.drain(120)

    runs, aruns = [], []
    for r in range(repeats):
        runs.append(hook_ms(evaluator, agent, run_output, f"sync-{r}", n))
        aruns.append(asyncio.run(async_hook_ms(evaluator, agent, run_output, f"async-{r}", n)))
        judgehooks.drain(600)
    return {"run": statistics.mean(runs), "arun": statistics.mean(aruns), "put": _put_alone(kind, tmp)}


def _put_alone(kind: str, tmp: str, n: int = 3000) -> float:
    """Microseconds per put, median."""
    from judgehooks._grading.journal import JournalLog
    from judgehooks._grading.outbox import Job, Outbox

    text = json.dumps({"run_id": "r", "input": "q" * 400, "output": "a" * 1500})
    outbox = Outbox(f"{tmp}/{kind}-puts.outbox.db")
    log = JournalLog(outbox) if kind == "JournalLog" else outbox
    times = []
    for i in range(n):
        job = Job(id=f"put-{i}", evaluator="e", context={}, created_at=time.time())
        start = time.perf_counter()
        log.put(job, text)
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], sys.argv[4])), flush=True)
        os._exit(0)
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory() as tmp, stub_server(500) as server:
        for r in range(args.rounds):
            for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
                out = subprocess.run([sys.executable, HERE, "--child", kind, server.base_url, f"{tmp}/{r}"],
                                     check=True, capture_output=True, text=True)
                results[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
    rows = []
    for measure, label in (("run", "hook's added latency, run(), ms"), ("arun", "the same, arun(), ms"),
                           ("put", "one put alone, us")):
        journal, sqlite = ([r[measure] for r in results[kind]] for kind in KINDS)
        saved = statistics.mean(1 - j / s for j, s in zip(journal, sqlite, strict=True))
        rows.append([label, *spread(journal), *spread(sqlite), f"{saved:.1%}"])
    table(f"The job log: JournalLog against one SQLite row per put ({args.rounds} rounds, interleaved)",
          ["measure", "JournalLog", "range", "Outbox (SQLite row)", "range", "JournalLog saves (mean of rounds)"],
          rows)


if __name__ == "__main__":
    main()
