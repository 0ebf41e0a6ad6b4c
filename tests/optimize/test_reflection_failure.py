"""A reflection model that cannot be used says why (audit 4, item 14): the result's `stopped` is
"reflection_failed" on any reflection failure that left no candidate (also when the budget ends
before three failures in a row), `reflection_error` and the warning name the URL, the kind and the
message (keys masked), and `judgehooks optimize` exits nonzero without writing `--out` when the model
never answered. The agent and the judge answer on the loopback server; the reflection model is a
port nothing listens on, or the loopback server refusing the request with an error body that quotes
the key it was sent."""

from __future__ import annotations

import json
import socket

import pytest
from _project import project  # noqa: F401  (a fixture)
from _runner import run_cli
from _world import ORIGINAL, World
from structlog.testing import capture_logs

import judgehooks

pytest.importorskip("gepa")

KEY = "sk-reflect-7e6d5c4b3a2f1e0d9c8b"


@pytest.fixture
def dead_url():
    """A loopback URL nothing listens on (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _optimize(world: World, **settings):
    options = {"evaluators": [world.judge()], "reflection_model": "openai/reflect", "api_key": KEY,
               "max_metric_calls": 40, "holdout": 0.5, "timeout": 10}
    return judgehooks.optimize(world.agent(), world.cases(20), **{**options, **settings})


def test_a_dead_reflection_endpoint_is_named_with_its_url_and_why(server, dead_url):
    world = World(server)
    with capture_logs() as logs:
        result = _optimize(world, api_base=dead_url)
    assert result.stopped == "reflection_failed" and result.instructions == ORIGINAL
    assert result.reflection_never_answered and result.spend["reflection_failures"] >= 1
    why = result.reflection_error
    assert why.startswith(f"the reflection model 'openai/reflect' at {dead_url} did not answer (connection): ")
    assert why.split("(connection): ", 1)[1].strip()  # the error's own words, not just its type
    assert result.note.startswith(f"no candidate was found: {why}")
    [first, *_] = [e for e in logs if e["event"] == "reflection_error"]
    assert first["url"] == dead_url and first["kind"] == "connection" and first["message"] == why
    assert first["log_level"] == "warning"


def test_one_failure_before_the_budget_ends_is_reflection_failed_not_none(server, dead_url):
    """26 runs leave room for one try: one failed reflection call, then the budget ends (three in a
    row were needed before)."""
    world = World(server)
    result = _optimize(world, api_base=dead_url, max_metric_calls=26)
    assert result.spend["calls"]["reflection"] == 1 == result.spend["reflection_failures"]
    assert result.stopped == "reflection_failed" and dead_url in result.reflection_error


def test_a_reflection_error_body_quoting_the_key_is_scrubbed(server):
    """The loopback server answers the reflection model 400 with a body quoting its Authorization."""
    world = World(server)

    def handle(request):  # "judge-reflect" is left to the stub's own judge route: the directive makes it echo
        if request.get("model") == "judge-reflect":
            return None
        return world.handle(request)

    server.configure(handler=handle)
    cases = [{**c, "input": c["input"] + " [[judge_echo_auth=400]]"} for c in world.cases(20)]
    with capture_logs() as logs:
        result = judgehooks.optimize(world.agent(), cases, evaluators=[world.judge()], api_base=server.base_url,
                                     reflection_model="openai/judge-reflect", api_key=KEY, max_metric_calls=40,
                                     holdout=0.5, timeout=10)
    assert result.stopped == "reflection_failed"
    assert f"at {server.base_url} did not answer (HTTP 400)" in result.reflection_error
    assert "Authorization: Bearer [REDACTED]" in result.reflection_error
    assert KEY not in json.dumps(result.to_json()) and KEY not in repr(logs)


def test_the_command_exits_nonzero_and_writes_no_out_when_the_reflection_model_never_answered(project, server,
                                                                                             dead_url):
    folder, package, _ = project
    done = run_cli("optimize", "--agent", f"{package}.app:agent", "--cases", "failures.jsonl",
                   "--evaluator", f"{package}.app:capitals", "--reflection-model", "openai/reflect",
                   "--api-base", dead_url, "--api-key", KEY, "--max-metric-calls", "40", "--holdout", "0.5",
                   "--out", "instructions.md", cwd=folder)
    assert done.returncode == 1
    assert not (folder / "instructions.md").exists()
    assert "stopped: reflection_failed (the reflection model failed and no candidate came from it)" in done.stdout
    assert f"reflection model: the reflection model 'openai/reflect' at {dead_url} did not answer" in done.stdout
    assert "wrote the best instructions" not in done.stdout
    [last] = done.stderr.strip().splitlines()[-1:]
    assert last.startswith("judgehooks: optimize: the reflection model never answered (")
    assert dead_url in last and last.endswith("instructions.md was not written")
    assert KEY not in done.stdout + done.stderr
