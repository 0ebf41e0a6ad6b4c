"""`judgehooks optimize`, in-process (`_runner.run_cli`), on the loopback world of `_world`."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid

import pytest
from _runner import run_cli
from _world import BETTER, KEYWORD, ORIGINAL, World

pytest.importorskip("gepa")


@pytest.fixture
def project(tmp_path, server):
    """A user's module with the agent and the evaluator, and the failures `judgehooks export` wrote."""
    package = f"shop_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "app.py").write_text(textwrap.dedent(f"""
        from agno.agent import Agent
        from agno.models.openai.like import OpenAILike
        from judgehooks import AgentAsJudgeEval, MemoryStore

        agent = Agent(model=OpenAILike(id="agent", base_url={server.base_url!r}, api_key="k"),
                      instructions={ORIGINAL!r}, telemetry=False)
        capitals = AgentAsJudgeEval(criteria="The answer is in capital letters.", model="openai/judge",
                                    api_base={server.base_url!r}, api_key="k", name="capitals", store=MemoryStore())
    """))
    world = World(server)
    cases = tmp_path / "failures.jsonl"
    cases.write_text("".join(json.dumps({"id": c["id"], "input": c["input"], "output": c["input"].lower(),
                                         "metadata": {"reason": "the answer must be in capital letters"}}) + "\n"
                             for c in world.cases(20)))
    yield tmp_path, package, world
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]


def test_optimize_prints_candidates_scores_and_the_diff_and_writes_the_instructions(project, server):
    folder, package, world = project
    done = run_cli("optimize", "--agent", f"{package}.app:agent", "--cases", "failures.jsonl",
                   "--evaluator", f"{package}.app:capitals", "--reflection-model", "openai/reflect",
                   "--api-base", server.base_url, "--api-key", "k", "--max-metric-calls", "40", "--holdout", "0.5",
                   "--out", "instructions.md", "--progress", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert "optimizing" in done.stderr  # the progress bar
    out = done.stdout
    assert out.splitlines()[0].split() == ["#", "from", "train", "held-out", "instructions"]
    assert "held-out pass rate: 0% -> 100% (10 held-out, 10 training cases)" in out
    assert "better: 10 held-out case(s) fixed and 0 broken of 10" in out
    assert f"-{ORIGINAL}" in out and f"+{BETTER}" in out
    assert (folder / "instructions.md").read_text() == BETTER + "\n"
    for case in world.cases(20):  # the export's reasons reach the reflection model only for training cases
        if case["input"] in "".join(world.reflection_prompts):
            assert KEYWORD not in case["input"]


def test_optimize_refuses_what_is_not_an_agent_by_name(project, server):
    folder, package, _ = project
    done = run_cli("optimize", "--agent", f"{package}.app:capitals", "--cases", "failures.jsonl",
                   "--evaluator", f"{package}.app:capitals", "--reflection-model", "openai/reflect", cwd=folder)
    assert done.returncode == 2 and "--import-agent" in done.stderr and "AgentAsJudgeEval" in done.stderr
    done = run_cli("optimize", "--agent", f"{package}.app:agent", "--cases", "missing.jsonl",
                   "--evaluator", f"{package}.app:capitals", "--reflection-model", "openai/reflect", cwd=folder)
    assert done.returncode == 2 and "no file 'missing.jsonl'" in done.stderr


def test_optimize_takes_an_agents_failed_records_from_a_store(project, server):
    folder, package, world = project
    from judgehooks import SQLiteStore

    store = SQLiteStore(str(folder / "evals.db"))
    agent = world.agent(id="shop", post_hooks=[world.judge(store=store)])
    for case in world.cases(12):
        agent.run(case["input"])
    other = world.agent(id="other", post_hooks=[world.judge(store=store)])
    other.run("a question of another agent")
    done = run_cli("optimize", "--agent", f"{package}.app:agent", "--from-store", "sqlite:///evals.db",
                   "--agent-id", "shop", "--since", "1h", "--evaluator", f"{package}.app:capitals",
                   "--reflection-model", "openai/reflect", "--api-base", server.base_url, "--api-key", "k",
                   "--holdout", "0.5", "--json", cwd=folder)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["train_size"], result["holdout_size"]) == (6, 6)
    assert result["instructions"] == BETTER and not result["conclusive"] and "too small" in result["note"]
    assert "a question of another agent" not in "".join(world.reflection_prompts)
