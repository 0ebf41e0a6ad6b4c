"""agno's cookbook scenarios for `AgentAsJudgeEval`, each run with agno's class and with ours on the
same loopback stub, comparing what a user of the example sees: the printed output, the callbacks,
the agno db's eval rows, the judged run's metrics and the files left in the working directory.

The scenarios are agno's (cookbook/09_evals/agent_as_judge/*, the team and agent eval-metrics
examples, AgentOS's background evals example and the demo app's quality evals), written here in
our own code with the stub's models (`OpenAIChat` at the stub's URL) in place of OpenAI's. Every
difference that remains is asserted below and listed in docs/how-to/migrating.md, so neither the
test nor the page can go stale alone.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agno.agent import Agent
from agno.db.sqlite import AsyncSqliteDb, SqliteDb
from agno.eval.agent_as_judge import AgentAsJudgeEval as AgnoEval
from agno.models.openai import OpenAIChat
from agno.team import Team

import judgehooks
from judgehooks import AgentAsJudgeEval as OurEval
from judgehooks.stores._agnorows import record_of
from judgehooks.testing import StubLLMServer

BOTH = {"agno": AgnoEval, "judgehooks": OurEval}


def chat(server: StubLLMServer, name: str) -> OpenAIChat:
    """agno's OpenAIChat at the stub: `judge...` models give verdicts, others echo the question."""
    return OpenAIChat(id=name, base_url=server.base_url, api_key="k")


@dataclass
class Seen:
    """What one class did in one scenario."""
    printed: str = ""
    failed: list[tuple[Any, bool]] = field(default_factory=list)  # (score, passed) per on_fail call
    rows: list[dict[str, Any]] = field(default_factory=list)  # the agno db's eval runs, in agno's keys
    row_extras: set[str] = field(default_factory=set)  # keys of eval_data beyond agno's
    ours: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (eval run id, eval_data) of each row
    metrics: list[tuple[str, str]] = field(default_factory=list)  # (provider, id) of details["eval_model"]
    files: list[str] = field(default_factory=list)  # what the working directory holds afterwards
    refused: str = ""  # a step of the example the class refused, and why


AGNO_EVAL_DATA = ("results", "avg_score", "min_score", "max_score", "std_dev_score", "pass_rate")
AGNO_RESULT = ("input", "output", "criteria", "score", "reason", "passed")


def rounded(value: Any) -> Any:
    """agno sums a percentage one way, we another: 66.66666666666666 and 66.66666666666667 are the same rate."""
    return round(value, 9) if isinstance(value, float) else value


def rows_of(db: Any) -> tuple[list[dict[str, Any]], set[str], list[tuple[str, dict[str, Any]]]]:
    runs = db.get_eval_runs() or []
    if asyncio.iscoroutine(runs):
        runs = asyncio.run(runs)
    rows, extras, ours = [], set(), []
    for run in sorted(runs, key=lambda r: [x["input"] for x in r.eval_data["results"]]):
        data = run.eval_data
        extras |= set(data) - set(AGNO_EVAL_DATA)
        ours.append((run.run_id, data))
        rows.append({
            "name": run.name, "eval_type": run.eval_type.value, "agent_id": run.agent_id, "team_id": run.team_id,
            "model": (run.model_id, run.model_provider), "eval_input": run.eval_input,
            "eval_data": {k: rounded(data.get(k)) for k in AGNO_EVAL_DATA if k != "results"},
            "results": [{k: r.get(k) for k in AGNO_RESULT} for r in data["results"]],
        })
    return rows, extras, ours


# ---- the scenarios: each builds its eval with the class given and runs it as agno's example does ---------
# A scenario gets (Eval, server, db, seen) and returns the run outputs whose metrics it compares.


def basic(Eval, server, db, seen):
    """agent_as_judge_basic.py, sync half: a numeric judge with on_fail and a db, run on an answer."""
    ev = Eval(name="Explanation Quality", model=chat(server, "judge"), scoring_strategy="numeric", threshold=7,
              criteria="Explanation should be clear, beginner-friendly, and use simple language",
              on_fail=lambda e: seen.failed.append((e.score, e.passed)), db=db)
    agent = Agent(id="writer", model=chat(server, "agent"), instructions="You are a technical writer.", db=db)
    response = agent.run("Explain what an API is [[score=8]]")
    result = ev.run(input="Explain what an API is", output=str(response.content), print_results=True,
                    print_summary=True)
    print(f"Score: {result.avg_score:.2f}/10, passed: {result.pass_rate}")
    return []


def basic_async(Eval, server, db, seen):
    """agent_as_judge_basic.py, async half: arun with an AsyncSqliteDb and threshold 10 (so on_fail fires)."""
    ev = Eval(name="ML Explanation Quality", model=chat(server, "judge"), scoring_strategy="numeric", threshold=10,
              criteria="Explanation should be clear, beginner-friendly, and avoid jargon",
              on_fail=lambda e: seen.failed.append((e.score, e.passed)), db=db)
    agent = Agent(id="helper", model=chat(server, "agent"), db=db)

    async def main():
        response = await agent.arun("Explain machine learning [[score=8]]")
        return await ev.arun(input="Explain machine learning", output=str(response.content), print_results=True,
                             print_summary=True)

    asyncio.run(main())
    return []


def batch(Eval, server, db, seen):
    """agent_as_judge_batch.py: three cases in one run, the summary printed."""
    ev = Eval(name="Customer Service Quality", model=chat(server, "judge"), scoring_strategy="numeric",
              threshold=7, criteria="Response should be empathetic, professional, and helpful", db=db)
    ev.run(cases=[{"input": "My order is late", "output": "Sorry, it ships today [[score=9]]"},
                  {"input": "Refund please", "output": "No. [[score=3]]"},
                  {"input": "Where is my parcel?", "output": "Tracking sent [[score=7]]"}],
           print_results=True, print_summary=True)
    return []


def binary(Eval, server, db, seen):
    """agent_as_judge_binary.py: a PASS/FAIL judge on an agent's answer."""
    ev = Eval(name="Professional Tone Check", model=chat(server, "judge"), scoring_strategy="binary",
              criteria="Response must maintain professional tone without informal language", db=db)
    agent = Agent(id="support", model=chat(server, "agent"), instructions="You are a support agent.")
    response = agent.run("I need help with my account [[fail]]")
    result = ev.run(input="I need help with my account", output=str(response.content), print_results=True,
                    print_summary=True)
    print(f"Result: {'PASSED' if result.results[0].passed else 'FAILED'}")
    return []


def custom_evaluator(Eval, server, db, seen):
    """agent_as_judge_custom_evaluator.py: the caller's own judge agent."""
    judge_agent = Agent(model=chat(server, "judge"), description="Strict technical evaluator",
                        instructions="Only give high scores to exceptionally clear explanations.")
    ev = Eval(name="Technical Accuracy", criteria="Explanation must be technically accurate and complete",
              scoring_strategy="numeric", threshold=8, evaluator_agent=judge_agent, db=db)
    agent = Agent(id="explainer", model=chat(server, "agent"))
    response = agent.run("What is a neural network? [[score=9]]")
    ev.run(input="What is a neural network?", output=str(response.content), print_results=True)
    return []


def eval_metrics(Eval, server, db, seen):
    """agent_as_judge_eval_metrics.py: a post hook folds the judge's usage into the run's metrics."""
    ev = Eval(name="Response Quality", model=chat(server, "judge"), scoring_strategy="binary",
              criteria="Response should be helpful, accurate, and well-structured")
    agent = Agent(id="answers", model=chat(server, "agent"), post_hooks=[ev])
    result = agent.run("What is the capital of Japan?")
    print("Total tokens (agent + eval):", result.metrics.total_tokens > 0)
    return [result]


def post_hook(Eval, server, db, seen):
    """agent_as_judge_post_hook.py: a numeric post hook with a db, on run() and on arun()."""
    ev = Eval(name="Response Quality Check", model=chat(server, "judge"), scoring_strategy="numeric",
              threshold=7, criteria="Response should be professional, well-balanced", db=db)
    agent = Agent(id="pro", model=chat(server, "agent"), post_hooks=[ev], db=db)
    first = agent.run("What are the benefits of renewable energy? [[score=8]]")
    second = asyncio.run(agent.arun("What are the risks of nuclear power? [[score=6]]"))
    return [first, second]


def research_team(server: StubLLMServer, *hooks: Any, db: Any = None) -> Team:
    researcher = Agent(id="researcher", name="Researcher", role="Research", model=chat(server, "agent"))
    writer = Agent(id="writer", name="Writer", role="Write summaries", model=chat(server, "agent"))
    return Team(id="research-team", name="Research Team", model=chat(server, "agent"), members=[researcher, writer],
                post_hooks=list(hooks), db=db)


def team(Eval, server, db, seen):
    """agent_as_judge_team.py: a team's answer judged afterwards, binary."""
    response = research_team(server, db=db).run("Explain quantum computing")
    ev = Eval(name="Team Response Quality", model=chat(server, "judge"), scoring_strategy="binary",
              criteria="Response should be well-researched, clear, and comprehensive with good flow", db=db)
    ev.run(input="Explain quantum computing", output=str(response.content), print_results=True, print_summary=True)
    return []


def team_post_hook(Eval, server, db, seen):
    """agent_as_judge_team_post_hook.py: a numeric post hook on a team, with a db."""
    ev = Eval(name="Team Response Quality", model=chat(server, "judge"), scoring_strategy="numeric", threshold=7,
              criteria="Response should be well-researched and show good collaboration", db=db)
    response = research_team(server, ev, db=db).run("Explain quantum computing [[score=9]]")
    return [response]


def guidelines(Eval, server, db, seen):
    """agent_as_judge_with_guidelines.py: numeric with additional guidelines."""
    ev = Eval(name="Product Info Quality", model=chat(server, "judge"), scoring_strategy="numeric", threshold=7,
              criteria="Response should be informative and well-formatted",
              additional_guidelines=["Must include specific numbers", "Should use bullet points",
                                     "Must not exaggerate"], db=db)
    agent = Agent(id="product", model=chat(server, "agent"))
    response = agent.run("Describe the Model X battery [[score=8]]")
    ev.run(input="Describe the Model X battery", output=str(response.content), print_results=True,
           print_summary=True)
    return []


def with_tools(Eval, server, db, seen):
    """agent_as_judge_with_tools.py: the answer of an agent that called a tool."""
    from agno.tools.calculator import CalculatorTools

    agent = Agent(id="calc", model=chat(server, "agent"), tools=[CalculatorTools()])
    response = agent.run("What is 10 multiplied by 5? [[tool=multiply]] [[arg_a=10]] [[arg_b=5]]")
    ev = Eval(name="Calculator Tool Usage", model=chat(server, "judge"), scoring_strategy="binary",
              criteria="Response should clearly explain the calculation process", db=db)
    ev.run(input="What is 10 multiplied by 5?", output=str(response.content), print_results=True)
    return []


def team_eval_metrics(Eval, server, db, seen):
    """teams' 05_team_eval_metrics.py: a binary post hook on a team folds the judge into the team's metrics."""
    ev = Eval(name="Quality Check", model=chat(server, "judge"), scoring_strategy="binary",
              criteria="Response should be accurate, well-structured, and concise")
    result = research_team(server, ev).run("What are the three laws of thermodynamics?")
    return [result]


def agentos_background(Eval, server, db, seen):
    """AgentOS background_tasks/background_evals_example.py: `run_in_background = True` on a post hook
    of an agent served by AgentOS with an AsyncSqliteDb; one run over HTTP."""
    from agno.os import AgentOS
    from fastapi.testclient import TestClient

    def completeness(**extra: Any) -> Any:
        return Eval(name="Completeness Check", model=chat(server, "judge"), scoring_strategy="binary", db=db,
                    criteria="Response should be complete and address all parts of the question", **extra)

    ev = completeness()
    try:
        ev.run_in_background = True  # as the example does it
    except AttributeError as exc:  # judgehooks once refused this with db= (the test asserts it no longer does)
        seen.refused = str(exc)
        ev = completeness(run_in_background=True)
    agent = Agent(id="basic-agent", name="Basic Agent", model=chat(server, "agent"), post_hooks=[ev], db=db)
    app = AgentOS(agents=[agent], db=db, telemetry=False).get_app()
    with TestClient(app) as client:  # runs FastAPI's background tasks before the call returns
        reply = client.post("/agents/basic-agent/runs", data={"message": "Tell me about Mars", "stream": "false"})
        assert reply.status_code == 200, reply.text
    return []


def demo_app(Eval, server, db, seen):
    """The demo app's quality evals (evals/quality.py): one judge, its db and guidelines, run on each
    answer with print_results. (The demo's judge is `OpenAIResponses`; the stub speaks chat completions.)"""
    ev = Eval(db=db, name="Scout - Answer Quality", model=chat(server, "judge"), scoring_strategy="numeric",
              threshold=7, criteria="Response should answer the question directly with specific details",
              additional_guidelines=["Must reference a source file path", "Must include concrete details"])
    scout = Agent(id="scout", model=chat(server, "agent"))
    for q in ("What is our PTO policy? [[score=8]]", "How do I request a new laptop? [[score=5]]"):
        print(f"\n  > {q}")
        response = scout.run(q)
        ev.run(input=q, output=str(response.content), print_results=True)
    return []


SCENARIOS: dict[str, tuple[Callable[..., list[Any]], str]] = {  # name: (scenario, its db: "sync", "async" or "")
    "basic": (basic, "sync"), "basic_async": (basic_async, "async"), "batch": (batch, "sync"),
    "binary": (binary, "sync"), "custom_evaluator": (custom_evaluator, "sync"), "eval_metrics": (eval_metrics, ""),
    "post_hook": (post_hook, "sync"), "team": (team, "sync"), "team_post_hook": (team_post_hook, "sync"),
    "guidelines": (guidelines, "sync"), "with_tools": (with_tools, "sync"),
    "team_eval_metrics": (team_eval_metrics, ""), "agentos_background": (agentos_background, "async"),
    "demo_app": (demo_app, "sync"),
}


def observe(name: str, Eval: type, server: StubLLMServer, where: Path, capsys: pytest.CaptureFixture) -> Seen:
    scenario, kind = SCENARIOS[name]
    where.mkdir()
    os.chdir(where)
    db = None
    if kind == "sync":
        db = SqliteDb(db_file=str(where / "agno.db"))
    elif kind == "async":
        db = AsyncSqliteDb(db_file=str(where / "agno.db"))
    seen = Seen()
    capsys.readouterr()
    outputs = scenario(Eval, server, db, seen)
    assert judgehooks.drain(60)
    seen.printed = capsys.readouterr().out
    if db is not None:
        seen.rows, seen.row_extras, seen.ours = rows_of(db)
    seen.metrics = [(m.provider, m.id) for out in outputs for m in out.metrics.details.get("eval_model", [])]
    seen.files = sorted(p.name for p in where.iterdir() if not p.name.startswith("agno.db"))
    return seen


# ---- the comparison ----------------------------------------------------------------------------------

_BOX = re.compile(r"^[\u2500-\u257f]+$")  # rich's table borders
_DIRECTIVE = re.compile(r"\[\[[^\]]*\]\]|\[\]")  # the stub's directives, and what agno's markup leaves of them


def words(printed: str) -> list[str]:
    """The printed words in order, without table borders, wrapping or the stub's directives."""
    return [w for w in _DIRECTIVE.sub(" ", printed).split() if not _BOX.match(w)]




@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_cookbook_scenario_runs_alike_with_agnos_class_and_ours(name, server, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    agno, ours = (observe(name, Eval, server, tmp_path / label, capsys) for label, Eval in BOTH.items())

    # printed: the same tables and lines, word for word
    assert words(ours.printed) == words(agno.printed)
    if "[[" in ours.printed:  # documented: agno's tables read the run's square brackets as rich markup
        assert ours.printed.count("[[") > agno.printed.count("[[")
    # callbacks, and the judge's usage folded into the judged runs' metrics
    assert ours.failed == agno.failed
    assert ours.metrics == agno.metrics
    if name in ("eval_metrics", "team_eval_metrics", "post_hook", "team_post_hook"):
        assert ours.metrics and all(m == ("OpenAI Chat", "judge") for m in ours.metrics)

    # the agno db's eval rows: agno's keys hold agno's values ...
    assert len(ours.rows) == len(agno.rows) and bool(agno.rows) == bool(SCENARIOS[name][1])
    for theirs, mine in zip(agno.rows, ours.rows, strict=True):
        # ... but the judge's provider, named as agno's metrics name it (documented), and the model
        # that judged even when agno's row says None (a custom evaluator agent: documented)
        assert mine.pop("model") == ("judge", "OpenAI Chat")
        assert theirs.pop("model") == ((None, None) if name == "custom_evaluator" else ("judge", "OpenAI"))
        assert mine == theirs
    # our additions to agno's eval_data sit under one key, "judgehooks" (nested, not beside agno's):
    # a batch's counts and errors for run(), the whole record for a post hook (migrating.md says so)
    if ours.rows:
        assert agno.row_extras == {"run_id"}
        assert ours.row_extras - agno.row_extras == {"judgehooks"}
    for run_id, data in ours.ours:
        [(kind, held)] = data["judgehooks"].items()
        if kind == "batch":
            assert {"errors", "error_count", "graded_count", "skipped_count", "evaluator_version", "ids"} <= set(held)
        else:
            assert kind == "record"
            record = record_of(run_id, data)  # the whole record: status, error_type, latency_ms, trace_id, ...
            assert record is not None and record.id == run_id and record.status in ("passed", "failed"), held
            assert {"status", "latency_ms", "evaluator_version"} <= set(held) and not set(held) & set(AGNO_EVAL_DATA)

    # with db=, agno's db is the only store: no file of ours appears in the working directory,
    # background grading's outbox included (it lives in the per-user state folder)
    # (a scenario without db= writes to the default store, ./judgehooks.db, as documented)
    assert agno.files == []
    assert {f.split("-")[0] for f in ours.files} == (set() if SCENARIOS[name][1] else {"judgehooks.db"}), ours.files
    # run_in_background assigned after construction (AgentOS's example does it) starts a queue on the
    # store already built with db=, as agno takes it
    assert agno.refused == ours.refused == ""


# ---- at exit: agno's SQLite file is left whole, as agno leaves it -------------------------------------

_AT_EXIT = '''
import asyncio, atexit, os, sys

# registered before judgehooks registers its own exit hook, so it runs after it: what the pool still holds
# a NullPool (agno's AsyncSqliteDb at its floor version) keeps no connection to count
atexit.register(lambda: print("pooled at exit:", getattr(db.db_engine.pool, "checkedin", lambda: 0)(), flush=True))

from agno.agent import Agent
from agno.db.sqlite import AsyncSqliteDb, SqliteDb
from agno.models.openai import OpenAIChat
if sys.argv[1] == "agno":
    from agno.eval.agent_as_judge import AgentAsJudgeEval
else:
    from judgehooks import AgentAsJudgeEval
if sys.argv[2] == "binary":  # agno's cookbook agent_as_judge_binary.py, as written (the judge's default model)
    db = SqliteDb(db_file="tmp/agent_as_judge_binary.db")
    agent = Agent(model=OpenAIChat(id="gpt-4o-mini"), instructions="You are a customer service agent.", db=db)
    evaluation = AgentAsJudgeEval(name="Professional Tone Check", db=db,
                                  criteria="Response must maintain professional tone without informal language")
    response = agent.run("I need help with my account [[fail]]")
    result = evaluation.run(input="I need help with my account", output=str(response.content))
    print(f"Result: {'PASSED' if result.results[0].passed else 'FAILED'}")
else:  # agent_as_judge_basic.py's async half: an AsyncSqliteDb
    db = AsyncSqliteDb(db_file="tmp/agent_as_judge_basic.db")
    agent = Agent(model=OpenAIChat(id="gpt-4o-mini"), db=db)
    evaluation = AgentAsJudgeEval(name="ML Explanation Quality", criteria="Clear, avoids jargon",
                                  scoring_strategy="numeric", threshold=7, db=db)

    async def main():
        response = await agent.arun("Explain machine learning [[score=8]]")
        return await evaluation.arun(input="Explain machine learning", output=str(response.content))

    print(f"Result: {asyncio.run(main()).avg_score}")
'''


@pytest.mark.parametrize("scenario", ["binary", "basic_async"])
def test_agnos_sqlite_file_is_left_without_its_wal_at_exit(scenario, server, tmp_path):
    """agno's SqliteDb and AsyncSqliteDb open their file in WAL mode. Our store's writes left a
    pooled connection that interpreter exit did not always close, so agno.db-wal and -shm stayed
    beside the file after agno's cookbook agent_as_judge_binary.py (agno's class: never; ours, about
    one run in eight here, and every run with an AsyncSqliteDb). judgehooks now closes the pooled
    connections at exit, after its drain: the pool is empty, and only the file remains."""
    import subprocess
    import sys

    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": server.base_url, "OPENAI_API_BASE": server.base_url,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    classes = ("agno", "judgehooks") if scenario == "binary" else ("judgehooks",)  # agno's own async leaves its WAL
    for label in classes:
        where = tmp_path / label
        (where / "tmp").mkdir(parents=True)
        done = subprocess.run([sys.executable, "-c", _AT_EXIT, label, scenario], cwd=where, env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0 and "Result: " in done.stdout, done.stdout + done.stderr[-3000:]
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        if label == "judgehooks":
            assert "pooled at exit: 0" in done.stdout, done.stdout
        left = sorted(p.name for p in (where / "tmp").iterdir())
        assert len(left) == 1 and left[0].endswith(".db"), (label, left)
