"""`judgehooks doctor --import MODULE`: each evaluator the module builds (at module level or in an
agent's or team's post_hooks) checked against the loopback judge as it really behaves: healthy, a
closed port, a missing key, a reply that is no verdict. Each problem comes with its fix."""

from __future__ import annotations

import socket
import sys
import textwrap
import uuid

import pytest
from _runner import run_cli


@pytest.fixture
def app(tmp_path):
    """Writes a module of the user's own into the working directory; forgets it afterwards."""
    names: list[str] = []

    def write(source: str) -> str:
        name = f"doctor_app_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        names.append(name)
        return name

    yield write
    for name in names:
        sys.modules.pop(name, None)


def doctor(tmp_path, module: str, **env: str | None):
    return run_cli("doctor", "--import", module, "--timeout", "30", cwd=tmp_path,
                   env={"OPENAI_API_KEY": None, **env})


def judge_source(base_url: str, criteria: str = "Answers correctly", key: str | None = "k") -> str:
    return f"""
        from agno.agent import Agent
        from judgehooks import AgentAsJudgeEval
        judge = AgentAsJudgeEval(name="correct", criteria={criteria!r}, model="openai/judge",
                                 api_base={base_url!r}, api_key={key!r}, store="evals.db", timeout=30)
        bot = Agent(name="support-bot", post_hooks=[judge], telemetry=False)
    """


def test_a_healthy_evaluator_passes_every_check(app, server, tmp_path):
    done = doctor(tmp_path, app(judge_source(server.base_url)))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "correct (AgentAsJudgeEval), in the post_hooks of agent support-bot"
    assert [line.split(":")[0].strip() for line in lines[1:5]] == [
        "ok    store", "ok    key", "ok    endpoint", "ok    structured output"]
    assert lines[-1] == "all 1 evaluator(s) ready"
    assert server.settings.counts["judge"] == 1  # one tiny real call


def test_a_closed_port_is_an_endpoint_problem_with_its_fix(app, tmp_path):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    done = doctor(tmp_path, app(judge_source(closed)))
    assert done.returncode == 1
    fail = next(line for line in done.stdout.splitlines() if "FAIL" in line)
    assert fail.startswith("  FAIL  endpoint: openai/judge at " + closed)
    assert "fix: check api_base=" in done.stdout and "1 problem(s) found" in done.stdout


def test_a_missing_key_names_the_variable_to_set(app, server, tmp_path):
    done = doctor(tmp_path, app(judge_source(server.base_url, key=None)))
    assert done.returncode == 1
    assert "  FAIL  key: no OPENAI_API_KEY in the environment for 'openai/judge'" in done.stdout
    assert "fix: export OPENAI_API_KEY=..." in done.stdout
    assert server.settings.counts["judge"] == 0  # not called: it would only fail
    again = doctor(tmp_path, app(judge_source(server.base_url, key=None)), OPENAI_API_KEY="sk-set")
    assert again.returncode == 0, again.stdout


def test_a_reply_that_is_no_verdict_is_a_structured_output_problem(app, server, tmp_path):
    done = doctor(tmp_path, app(judge_source(server.base_url, criteria="Answers [[judge_malformed]]")))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert any(line.startswith("  ok    endpoint:") for line in lines)
    assert any(line.startswith("  FAIL  structured output: the reply does not parse as a verdict") for line in lines)


def test_without_import_it_checks_the_store_and_says_what_to_pass(tmp_path):
    done = run_cli("doctor", "--store", str(tmp_path / "evals.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == ("no evaluators checked: pass --import MODULE, the module that builds "
                                            "your evaluators or agents")


def test_a_module_without_evaluators_is_a_problem(app, tmp_path):
    done = doctor(tmp_path, app("x = 1\n"))
    assert done.returncode == 1 and "no judgehooks evaluator in" in done.stdout


@pytest.mark.parametrize("key", [None, "k"])
def test_a_model_with_no_provider_is_a_problem_that_says_the_provider_is_missing(app, server, tmp_path, key):
    """model="judge" (no provider prefix), with or without a key: litellm's table reports every key
    present for a provider it cannot name, and doctor said "ok key"; the call itself then fails.
    It now fails the check, saying the provider is what is missing and how to write one."""
    source = judge_source(server.base_url, key=key).replace('model="openai/judge"', 'model="judge"')
    done = doctor(tmp_path, app(source))
    assert done.returncode == 1, done.stdout
    lines = done.stdout.splitlines()
    assert not any(line.startswith("  ok    key") for line in lines), done.stdout
    assert "  FAIL  provider: 'judge' names no provider, so no key can be looked up" in done.stdout
    assert "fix: write the model as provider/name: openai/judge for an OpenAI-compatible server" in done.stdout
    assert "Provider List" not in done.stdout + done.stderr  # litellm's own print kept out of the report
    assert server.settings.counts["judge"] == 0
