"""The examples run as written (they use the scripted loopback server: no key, no network)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(name: str) -> str:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("JUDGEHOOKS_MODEL", None)
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=180,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_quickstart():
    out = run("quickstart.py")
    assert "5 verdicts stored" in out and "pass rate 75% over 4 graded runs; 1 judge error(s)" in out
    assert "ALERT  helpful scored 3/10" in out


@pytest.mark.slow
def test_offline_batch():
    out = run("offline_batch.py")
    assert "graded=3 pass_rate=67% errors=1" in out


@pytest.mark.slow
def test_team_judge():
    out = run("team_judge.py")
    assert "team Support failed" in out and "support-team Support passed" in out


@pytest.mark.slow
def test_background():
    out = run("background.py")
    assert "20 runs returned in" in out and "after drain: graded" in out
    graded = int(out.split("after drain: graded ")[1].split(",")[0])
    sampled_out = int(out.split("sampled out ")[1].split(",")[0])
    assert graded + sampled_out == 20 and f"{graded} records in" in out


@pytest.mark.slow
def test_team_gate():
    out = run("team_gate.py")
    fallback = "I can't answer that reliably right now; a colleague will follow up by email."
    assert "passed:   status=COMPLETED content='ECHO: Where is my order?'" in out
    assert f'blocked:  status=ERROR content="{fallback}"' in out
    assert f"then RunErrorEvent: \"{fallback}\"" in out
    assert "repaired: status=COMPLETED after 1 repair(s); verdicts ['failed', 'passed']" in out


@pytest.mark.slow
def test_alerts():
    out = run("alerts.py")
    assert "receiver: 4 failed-run webhooks, 1 Slack alert(s)" in out
    assert "Quality alert: helpful on Helpdesk: pass rate 71% over the last 7 graded runs" in out
    assert "dead receiver: {'sent': 0, 'failed': 1, 'dropped': 0, 'pending': 0}" in out


@pytest.mark.slow
def test_distributed_worker():
    import shutil

    if not (shutil.which("redis-server") or os.environ.get("JUDGEHOOKS_BROKER")):
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is missing: .ci/run installs it")
        pytest.skip("needs redis-server (apt-get install redis-server) or $JUDGEHOOKS_BROKER")
    out = run("distributed_worker.py")
    assert "forwarded to Redis: 20" in out and "20 records in the workers' store: 19 passed, 1 failed" in out
    graded = [int(line.split("stopped; ")[1].split(" graded")[0]) for line in out.splitlines() if "stopped;" in line]
    assert len(graded) == 2 and sum(graded) == 20
def test_checks():
    out = run("checks.py")
    assert "14 records, judge calls: 0" in out
    assert "search-then-cite  failed  called in the order ['cite', 'search'], required ['search', 'cite']" in out
    assert "weather-json      failed  temp_c: 'warm' is not of type 'number'" in out
    assert "desk       agno-tool-scorer  passed" in out


@pytest.mark.slow
def test_composites():
    out = run("composites.py")
    assert "10 records from 2 runs, 19 judge calls" in out
    assert "gated-judge failed  score=-      no-refusal: found ['sorry', 'cannot']" in out
    assert "samples [5, 6, 7] spread 2 reasked=True" in out and "borderline  failed  score=3" in out
    assert "criterion safe      x1 score=10" in out


@pytest.mark.slow
def test_custom_evaluator():
    out = run("custom_evaluator.py")
    assert "8 records in" in out and "ALERT no-shouting: shouted ['STOP']" in out
    assert "reading-level failed  score=0" in out
