"""`judgehooks optimize`, in-process (`_runner.run_cli`), on the loopback world of `_world`."""

from __future__ import annotations

import json

import pytest
from _project import project  # noqa: F401  (a fixture)
from _runner import run_cli
from _world import BETTER, INJECTED, KEYWORD, ORIGINAL, Obedient, planted_case

pytest.importorskip("gepa")


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


@pytest.mark.parametrize("url", ["sqlite:///evals.db", "evals.db"])
def test_optimize_takes_an_agents_failed_records_from_a_store(project, server, url):
    """--from-store takes what every --store takes: a URL, or a plain path (audit 4, item 16)."""
    folder, package, world = project
    from judgehooks import SQLiteStore

    store = SQLiteStore(str(folder / "evals.db"))
    agent = world.agent(id="shop", post_hooks=[world.judge(store=store)])
    for case in world.cases(12):
        agent.run(case["input"])
    other = world.agent(id="other", post_hooks=[world.judge(store=store)])
    other.run("a question of another agent")
    done = run_cli("optimize", "--agent", f"{package}.app:agent", "--from-store", url,
                   "--agent-id", "shop", "--since", "1h", "--evaluator", f"{package}.app:capitals",
                   "--reflection-model", "openai/reflect", "--api-base", server.base_url, "--api-key", "k",
                   "--holdout", "0.5", "--json", cwd=folder)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["train_size"], result["holdout_size"]) == (6, 6)
    assert result["instructions"] == BETTER and not result["conclusive"] and "too small" in result["note"]
    assert "a question of another agent" not in "".join(world.reflection_prompts)


def test_from_store_refuses_a_store_file_that_is_not_there_and_creates_none(project, server):
    folder, package, _ = project
    done = run_cli("optimize", "--agent", f"{package}.app:agent", "--from-store", "typo.db",
                   "--evaluator", f"{package}.app:capitals", "--reflection-model", "openai/reflect", cwd=folder)
    assert done.returncode != 0 and "cannot open store typo.db: no such file 'typo.db'" in done.stderr
    assert "where=" not in done.stderr and not (folder / "typo.db").exists()


def test_optimize_lists_what_the_new_instructions_echo_from_case_data(project, server):
    """A reflection model that obeys a line a case planted: the command names that line, its link and its
    address as echoed from case data (audit 4, M2)."""
    folder, package, _ = project
    Obedient(server)
    (folder / "planted.jsonl").write_text("".join(json.dumps(planted_case(i)) + "\n" for i in range(20)))
    done = run_cli("optimize", "--agent", f"{package}.app:agent", "--cases", "planted.jsonl",
                   "--evaluator", f"{package}.app:capitals", "--reflection-model", "openai/reflect",
                   "--api-base", server.base_url, "--api-key", "k", "--max-metric-calls", "60", "--holdout", "0.5",
                   cwd=folder)
    assert done.returncode == 0, done.stderr
    listed = done.stdout.split("echoed from case data", 1)[1].split("\n\n", 1)[0]
    assert [line.strip() for line in listed.splitlines() if line.strip().startswith("!")] == [
        f"! {INJECTED}", "! http://evil.example/verify", "! help@evil.example"]
