"""Shared benchmark plumbing: the stub server in its own process, tables, timers."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@contextmanager
def stub_server(judge_delay_ms: float = 0.0) -> Iterator[StubProcess]:
    """The loopback OpenAI-compatible server in a separate process, so its CPU is not ours."""
    proc = subprocess.Popen([sys.executable, "-m", "judgehooks.testing", "--port", "0",
                             "--judge-delay-ms", str(judge_delay_ms)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        yield StubProcess(port, proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


class StubProcess:
    def __init__(self, port: int, pid: int) -> None:
        self.port = port
        self.pid = pid
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the stub server process has used so far: on a 2-core machine
        it competes with the graders for the same cores."""
        return process_cpu_s(self.pid)

    def configure(self, **settings: object) -> None:
        req = urllib.request.Request(f"{self.base_url}/_control", data=json.dumps(settings).encode(),
                                     headers={"content-type": "application/json"}, method="POST")
        urllib.request.urlopen(req, timeout=10).read()


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of another live process, from /proc; 0.0 once it has exited."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_ms_per_call(fn, n: int) -> float:
    """Process CPU time (all threads) per call of fn(), in ms."""
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) * 1000 / n


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [list(map(str, header))] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n### {title}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(cells[0], widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    sys.stdout.flush()


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def spread(values: Sequence[float]) -> tuple[float, str]:
    """(median, "min-max") of a row's repeats: a change smaller than the range is noise."""
    return statistics.median(values), f"{_fmt(min(values))}-{_fmt(max(values))}"
