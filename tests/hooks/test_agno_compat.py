"""The drop-in promise, stated as tests: the same code runs against agno's `AgentAsJudgeEval` and
against judgehooks', with only the class swapped, and observes the same behaviour.

Every test takes `Eval`, parametrised over both classes, builds it with identical arguments and
asserts what agno's users rely on. A future agno release that changes its behaviour fails here
on agno's side first. Differences judgehooks keeps on purpose are documented in
docs/how-to/migrating.md and asserted in the tests named `test_documented_difference_*`.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator
from typing import Any
from unittest.mock import AsyncMock, MagicMock, patch

import pytest
from agno.agent import Agent
from agno.db.sqlite import SqliteDb
from agno.eval.agent_as_judge import AgentAsJudgeEval as AgnoEval
from agno.eval.agent_as_judge import AgentAsJudgeEvaluation, BinaryJudgeResponse, NumericJudgeResponse
from agno.models.openai.like import OpenAILike
from agno.team import Team

import judgehooks
from judgehooks import AgentAsJudgeEval as OurEval
from judgehooks.testing import StubLLMServer

AGNO_RESULT_FIELDS = {"run_id", "results", "avg_score", "min_score", "max_score", "std_dev_score", "pass_rate"}
AGNO_EVALUATION_FIELDS = {f.name for f in dataclasses.fields(AgentAsJudgeEvaluation)}


@pytest.fixture(params=[AgnoEval, OurEval], ids=["agno", "judgehooks"])
def Eval(request: pytest.FixtureRequest, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    monkeypatch.chdir(tmp_path)  # judgehooks' default store, ./judgehooks.db, lands here
    yield request.param
    judgehooks.drain(30)


def judge_model(server: StubLLMServer) -> OpenAILike:
    return OpenAILike(id="judge", base_url=server.base_url, api_key="k")


def agent_model(server: StubLLMServer) -> OpenAILike:
    return OpenAILike(id="agent", base_url=server.base_url, api_key="k")


def make_eval(Eval: type, server: StubLLMServer, **kw: Any) -> Any:
    """The same arguments for both classes: nothing judgehooks-only."""
    kw.setdefault("criteria", "The answer echoes the question.")
    return Eval(model=judge_model(server), telemetry=False, show_spinner=False, **kw)


def eval_runs(db: SqliteDb) -> list[Any]:
    """The db's eval runs, ordered by the first input they judged."""
    return sorted(db.get_eval_runs() or [], key=lambda run: [r["input"] for r in run.eval_data["results"]])


# ---- 0. the module's names -----------------------------------------------------------------------


def agno_public_names() -> list[str]:
    """The public names `agno.eval.agent_as_judge` defines (not the ones it imports)."""
    import agno.eval.agent_as_judge as module

    return sorted(name for name, value in vars(module).items()
                  if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__)


def test_every_public_name_of_agnos_agent_as_judge_imports_from_judgehooks():
    names = agno_public_names()
    assert {"AgentAsJudgeEval", "AgentAsJudgeEvaluation", "NumericJudgeResponse"} <= set(names)  # read, not empty
    assert [n for n in names if n not in judgehooks.__all__] == []
    namespace: dict[str, Any] = {}
    exec(f"from judgehooks import {', '.join(names)}", namespace)  # the import line a user swaps
    assert all(isinstance(namespace[n], type) for n in names)


def printed(evaluation: Any) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=100, color_system=None)
    evaluation.print_eval(console)
    return str(console.file.getvalue())  # type: ignore[attr-defined]


@pytest.mark.parametrize("fields", [("What is ML?", "ML is ...", "accurate", 8, "Clear, **short**", True),
                                    ("q", "a", "polite", None, "Rude", False)], ids=["numeric", "binary"])
def test_an_evaluation_built_from_agnos_fields_is_agnos_and_prints_as_agnos(fields):
    ours, theirs = judgehooks.AgentAsJudgeEvaluation(*fields), AgentAsJudgeEvaluation(*fields)
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    assert printed(ours) == printed(theirs)


def test_records_are_agent_as_judge_evaluations_and_the_verdict_schemas_are_agnos(server):
    failed: list[Any] = []
    ev = make_eval(OurEval, server, scoring_strategy="numeric", threshold=7, on_fail=failed.append,
                   store=judgehooks.MemoryStore())
    result = ev.run(input="q", output="a [[score=3]]")
    assert isinstance(failed[0], judgehooks.AgentAsJudgeEvaluation)  # what on_fail gets, as agno types it
    assert all(isinstance(r, judgehooks.AgentAsJudgeEvaluation) for r in result.results)
    assert (judgehooks.NumericJudgeResponse, judgehooks.BinaryJudgeResponse) == (NumericJudgeResponse,
                                                                                 BinaryJudgeResponse)
    assert ev.get_evaluator_agent().output_schema is judgehooks.NumericJudgeResponse


# ---- 1. the judge's usage is folded into the judged run's metrics ------------------------------


def test_judge_usage_is_folded_into_the_run_metrics(Eval, server):
    agent = Agent(model=agent_model(server), post_hooks=[make_eval(Eval, server)], telemetry=False)
    out = agent.run("What is the capital of France?")
    metrics = out.metrics
    agent_tokens = sum(m.total_tokens for m in metrics.details["model"])
    eval_tokens = sum(m.total_tokens for m in metrics.details["eval_model"])
    assert eval_tokens > 0 and metrics.total_tokens == agent_tokens + eval_tokens
    assert [m.id for m in metrics.details["eval_model"]] == ["judge"]
    assert metrics.additional_metrics["eval_duration"] > 0


@pytest.mark.anyio
async def test_judge_usage_is_folded_into_async_and_team_runs(Eval, server):
    member = Agent(name="member", model=agent_model(server), telemetry=False)
    team = Team(members=[member], model=agent_model(server), post_hooks=[make_eval(Eval, server)], telemetry=False)
    out = await team.arun("hello team")
    assert sum(m.total_tokens for m in out.metrics.details["eval_model"]) > 0
    assert "eval_duration" in out.metrics.additional_metrics


def test_offline_run_folds_into_the_metrics_it_is_given(Eval, server):
    from agno.metrics import RunMetrics

    metrics = RunMetrics()
    make_eval(Eval, server).run(input="q", output="a", run_metrics=metrics)
    assert metrics.total_tokens > 0 and "eval_model" in metrics.details


# ---- 2. settings assigned after construction take effect from the next run ---------------------


def test_assigned_settings_take_effect_on_the_next_run(Eval, server):
    failed: list[Any] = []
    ev = make_eval(Eval, server, scoring_strategy="numeric", threshold=7)
    agent = Agent(model=agent_model(server), post_hooks=[ev], telemetry=False)
    ev_first = ev.run(input="q", output="answer [[score=9]]")
    assert ev_first.results[0].passed is True
    ev.threshold = 10
    ev.criteria = "Must be in French"
    ev.on_fail = failed.append
    agent.run("again [[score=9]]")
    result = ev.run(input="q", output="answer [[score=9]]")
    assert result.results[0].passed is False and result.results[0].criteria == "Must be in French"
    assert "Must be in French" in server.settings.judge_prompts[-1]
    assert len(failed) == 2 and all(e.score == 9 and e.passed is False for e in failed)
    assert {e.criteria for e in failed} == {"Must be in French"}


def test_the_record_states_the_settings_that_were_used(server, tmp_path):
    store = judgehooks.MemoryStore()
    ev = make_eval(OurEval, server, scoring_strategy="numeric", threshold=7, store=store)
    ev.run(input="q", output="a [[score=8]]")
    ev.threshold, ev.criteria = 9, "Be brief."
    ev.run(input="q", output="a [[score=8]]")
    first, second = sorted(store.records, key=lambda r: r.created_at)
    assert (first.threshold, first.criteria, first.status) == (7, "The answer echoes the question.", "passed")
    assert (second.threshold, second.criteria, second.status) == (9, "Be brief.", "failed")


def test_an_assignment_that_cannot_take_effect_raises_naming_the_setting(server, tmp_path):
    ev = make_eval(OurEval, server, run_in_background=True, outbox=str(tmp_path / "o.db"),
                   store=judgehooks.MemoryStore())
    with pytest.raises(AttributeError, match="cannot change 'store' after background grading started"):
        ev.configure(store=judgehooks.MemoryStore())
    with pytest.raises(AttributeError, match="cannot change 'run_in_background'"):
        ev.run_in_background = False
    with pytest.raises(AttributeError, match="cannot change 'name'"):
        ev.name = "renamed"
    ev.on_fail = print  # a callback still can change: it is read per run
    assert ev.hook_settings.on_fail is print


def test_documented_difference_an_invalid_assignment_raises_and_keeps_the_old_value(server):
    agno = make_eval(AgnoEval, server, scoring_strategy="numeric", threshold=7)
    agno.threshold = 11  # agno checks at construction only: the bad value is kept, and no score reaches it
    assert agno.run(input="q", output="a [[score=10]]").results[0].passed is False
    ours = make_eval(OurEval, server, scoring_strategy="numeric", threshold=7, store=judgehooks.MemoryStore())
    with pytest.raises(ValueError, match="threshold must be between 1 and 10"):
        ours.threshold = 11
    assert ours.threshold == 7 and ours.run(input="q", output="a [[score=7]]").results[0].passed


def test_store_and_db_can_change_until_the_first_run_builds_the_store(server, tmp_path):
    first, second = judgehooks.MemoryStore(), judgehooks.MemoryStore()
    ev = make_eval(OurEval, server, store=first)
    ev.configure(store=second)
    ev.run(input="q", output="a")
    assert (len(first.records), len(second.records)) == (0, 1)
    with pytest.raises(AttributeError, match="cannot change 'store' after its store was built"):
        ev.configure(store=first)
    with pytest.raises(AttributeError, match="cannot change 'db'"):
        ev.db = SqliteDb(db_file=str(tmp_path / "late.db"))


def test_run_in_background_set_before_the_first_run_starts_the_queue(server, tmp_path):
    store = judgehooks.MemoryStore()
    ev = make_eval(OurEval, server, store=store, outbox=str(tmp_path / "o.db"))
    ev.run_in_background = True
    Agent(model=agent_model(server), post_hooks=[ev], telemetry=False).run("q")
    assert ev.stats()["submitted"] == 1 and judgehooks.drain(30)
    assert [r.status for r in store.records] == ["passed"]


# ---- 3. get_evaluator_agent() and evaluator_agent mock the judge -------------------------------


def _mock_agent(content: Any) -> MagicMock:
    response = MagicMock(content=content, metrics=None)
    agent = MagicMock()
    agent.run.return_value = response
    agent.arun = AsyncMock(return_value=response)
    return agent


def test_get_evaluator_agent_returns_an_agent_with_agnos_schema(Eval, server):
    agent = make_eval(Eval, server, scoring_strategy="numeric").get_evaluator_agent()
    assert isinstance(agent, Agent) and agent.output_schema is NumericJudgeResponse


def test_patching_get_evaluator_agent_mocks_the_judge(Eval, server):
    ev = make_eval(Eval, server)
    mocked = _mock_agent(BinaryJudgeResponse(passed=False, reason="mocked verdict"))
    with patch.object(ev, "get_evaluator_agent", return_value=mocked):
        result = ev.run(input="q", output="a")
    assert (result.results[0].passed, result.results[0].reason) == (False, "mocked verdict")
    assert server.settings.counts["judge"] == 0


def test_patching_the_class_method_mocks_the_judge_in_post_hooks(Eval, server):
    ev = make_eval(Eval, server, scoring_strategy="numeric", threshold=7)
    failed: list[Any] = []
    ev.on_fail = failed.append
    mocked = _mock_agent(NumericJudgeResponse(score=3, reason="too short"))
    with patch.object(Eval, "get_evaluator_agent", return_value=mocked):
        Agent(model=agent_model(server), post_hooks=[ev], telemetry=False).run("q")
    assert [(e.score, e.reason) for e in failed] == [(3, "too short")]


@pytest.mark.anyio
async def test_assigning_evaluator_agent_mocks_the_judge(Eval, server):
    ev = make_eval(Eval, server)
    ev.evaluator_agent = _mock_agent(BinaryJudgeResponse(passed=True, reason="mock says yes"))
    result = await ev.arun(input="q", output="a")
    assert result.results[0].reason == "mock says yes" and server.settings.counts["judge"] == 0


# ---- 4. result shapes ----------------------------------------------------------------------------


def test_result_and_evaluations_are_dataclasses_shaped_like_agnos(Eval, server, capsys):
    failed: list[Any] = []
    ev = make_eval(Eval, server, scoring_strategy="numeric", threshold=7, on_fail=failed.append)
    result = ev.run(cases=[{"input": "q1", "output": "a [[score=9]]"}, {"input": "q2", "output": "b [[score=4]]"}])
    data = dataclasses.asdict(result)
    assert AGNO_RESULT_FIELDS <= set(data)
    assert (data["min_score"], data["max_score"], data["pass_rate"]) == (4, 9, 50.0)
    assert data["std_dev_score"] == pytest.approx(3.5355, abs=1e-3)
    for item in data["results"]:
        assert AGNO_EVALUATION_FIELDS <= set(item)
    json.dumps(data, default=str)
    [evaluation] = failed
    assert {k: getattr(evaluation, k) for k in ("input", "output", "score", "passed")} == {
        "input": "q2", "output": "b [[score=4]]", "score": 4, "passed": False}
    assert f"{evaluation.score}/10" == "4/10" and isinstance(evaluation.score, int)
    assert AGNO_EVALUATION_FIELDS <= set(dataclasses.asdict(evaluation))
    capsys.readouterr()
    evaluation.print_eval()
    result.print_summary()
    out = capsys.readouterr().out
    assert "4/10" in out and "Pass Rate" in out.title()


def test_results_file_has_agnos_keys(Eval, server, tmp_path):
    ev = make_eval(Eval, server, name="saver", scoring_strategy="numeric",
                   file_path_to_save_results=str(tmp_path / "{name}-{run_id}.json"))
    result = ev.run(cases=[{"input": "q", "output": "a [[score=8]]"}, {"input": "q", "output": "a [[score=6]]"}])
    saved = json.loads((tmp_path / f"saver-{result.run_id}.json").read_text())
    assert AGNO_RESULT_FIELDS <= set(saved)
    assert (saved["min_score"], saved["max_score"], len(saved["results"])) == (6, 8, 2)
    assert AGNO_EVALUATION_FIELDS <= set(saved["results"][0])


# ---- 5. constructions agno accepts -------------------------------------------------------------


def test_a_float_threshold_is_held_as_agno_holds_it(Eval, server):
    ev = make_eval(Eval, server, scoring_strategy="numeric", threshold=7.5)
    result = ev.run(cases=[{"input": "q", "output": "a [[score=8]]"}, {"input": "q", "output": "a [[score=7]]"}])
    assert [r.passed for r in result.results] == [True, False]


def test_binary_mode_ignores_the_threshold(Eval, server):
    ev = make_eval(Eval, server, threshold=50)
    assert ev.run(input="q", output="a").results[0].passed is True


# ---- 6. db rows ----------------------------------------------------------------------------------


def test_a_batch_is_one_eval_run_holding_every_case(Eval, server, tmp_path):
    db = SqliteDb(db_file=str(tmp_path / "agno.db"))
    ev = make_eval(Eval, server, db=db, additional_guidelines=["Be kind."])
    ev.run(cases=[{"input": f"q{i}", "output": f"a{i}"} for i in range(3)])
    [run] = eval_runs(db)
    assert len(run.eval_data["results"]) == 3 and run.eval_data["pass_rate"] == 100.0
    assert run.eval_input == {"criteria": "The answer echoes the question.", "scoring_strategy": "binary",
                              "threshold": None, "additional_guidelines": ["Be kind."]}
    assert run.name is None


def test_a_live_hook_writes_one_eval_run_per_judged_run(Eval, server, tmp_path):
    db = SqliteDb(db_file=str(tmp_path / "agno.db"))
    ev = make_eval(Eval, server, db=db, name="Quality", scoring_strategy="numeric", threshold=6)
    agent = Agent(id="helper", model=agent_model(server), post_hooks=[ev], telemetry=False)
    agent.run("one [[score=9]]")
    agent.run("two [[score=2]]")
    runs = eval_runs(db)
    assert [len(r.eval_data["results"]) for r in runs] == [1, 1]
    assert [r.eval_data["results"][0]["passed"] for r in runs] == [True, False]
    assert {(r.name, r.agent_id, r.evaluated_component_name) for r in runs} == {("Quality", "helper", None)}
    assert runs[0].eval_input["threshold"] == 6


# ---- 7. agno's error messages ---------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [0, 11])
def test_threshold_errors_carry_agnos_text(Eval, server, threshold):
    with pytest.raises(ValueError, match=f"threshold must be between 1 and 10, got {threshold}"):
        make_eval(Eval, server, scoring_strategy="numeric", threshold=threshold)


# ---- agno's documented usages, with only the class swapped ---------------------------------------


def test_usage_guidelines_reach_the_judge(Eval, server):
    ev = make_eval(Eval, server, scoring_strategy="numeric", threshold=7,
                   additional_guidelines=["Mention the source.", "No jargon."])
    result = ev.run(input="q", output="a [[score=8]]", print_results=True, print_summary=True)
    assert result.results[0].score == 8 and result.pass_rate == 100.0
    # agno puts guidelines in the judge agent's instructions; judgehooks in the judge's prompt
    agent = ev.get_evaluator_agent()
    assert "Mention the source." in agent.instructions or "Mention the source." in server.settings.judge_prompts[-1]


def test_usage_custom_evaluator_agent(Eval, server):
    custom = Agent(model=judge_model(server), description="Strict technical evaluator", telemetry=False,
                   instructions="Only give high scores to exceptionally clear explanations.")
    ev = make_eval(Eval, server, scoring_strategy="numeric", threshold=8, evaluator_agent=custom)
    result = ev.run(input="What is ML?", output="ML is ... [[score=9]]", print_results=True)
    assert (result.results[0].score, result.results[0].passed) == (9, True)


@pytest.mark.anyio
async def test_usage_async_basic_with_on_fail(Eval, server, tmp_path):
    from agno.db.sqlite import AsyncSqliteDb

    db = AsyncSqliteDb(db_file=str(tmp_path / "async.db"))
    failed: list[Any] = []
    ev = make_eval(Eval, server, name="ML Explanation Quality", scoring_strategy="numeric", threshold=10,
                   on_fail=failed.append, db=db)
    result = await ev.arun(input="Explain ML", output="ML is ... [[score=8]]", print_results=True,
                           print_summary=True)
    assert result is not None and [e.score for e in failed] == [8]
    [run] = await db.get_eval_runs()
    assert run.name == "ML Explanation Quality"


def test_usage_team_post_hook_with_db(Eval, server, tmp_path):
    db = SqliteDb(db_file=str(tmp_path / "team.db"))
    ev = make_eval(Eval, server, scoring_strategy="numeric", threshold=7, db=db)
    member = Agent(name="researcher", model=agent_model(server), telemetry=False)
    team = Team(id="team-1", members=[member], model=agent_model(server), post_hooks=[ev], db=db, telemetry=False)
    team.run("Summarise [[score=8]]")
    [run] = eval_runs(db)
    assert run.team_id == "team-1" and run.eval_data["results"][0]["score"] == 8


# ---- documented differences -----------------------------------------------------------------------


def test_documented_difference_judge_errors_are_records(server):
    store = judgehooks.MemoryStore()
    agno_result = make_eval(AgnoEval, server).run(input="q", output="a [[judge_status=500]]")
    ours = make_eval(OurEval, server, store=store, retries=0).run(input="q", output="a [[judge_status=500]]")
    assert agno_result.results == [] and agno_result.pass_rate == 0.0  # agno: the case vanished
    assert [r.status for r in ours.results] == ["error"] and ours.pass_rate is None
    assert [r.status for r in store.records] == ["error"]


def test_the_record_states_what_the_judge_used_even_if_changed_while_it_judged(server):
    import threading
    import time

    store = judgehooks.MemoryStore()
    ev = make_eval(OurEval, server, scoring_strategy="numeric", threshold=7, store=store)
    grading = threading.Thread(target=ev.run, kwargs={"input": "q", "output": "a [[score=5]] [[judge_delay=1500]]"})
    grading.start()
    while server.settings.counts["judge"] == 0:  # the judge has the question: change the settings now
        time.sleep(0.01)
    ev.threshold, ev.criteria = 3, "changed meanwhile"
    grading.join()
    ev.run(input="q", output="a [[score=5]]")
    first, second = sorted(store.records, key=lambda r: r.created_at)
    assert (first.status, first.threshold, first.criteria) == ("failed", 7, "The answer echoes the question.")
    assert (second.status, second.threshold, second.criteria) == ("passed", 3, "changed meanwhile")


def test_documented_difference_background_usage_is_on_the_record(server, tmp_path):
    store = judgehooks.MemoryStore()
    ev = make_eval(OurEval, server, store=store, run_in_background=True, outbox=str(tmp_path / "o.db"))
    out = Agent(model=agent_model(server), post_hooks=[ev], telemetry=False).run("q")
    assert judgehooks.drain(30)
    assert "eval_model" not in (out.metrics.details or {})
    [record] = store.records
    assert record.prompt_tokens > 0 and record.completion_tokens > 0 and record.judge_model == "OpenAI/judge"


def test_a_bad_judge_assignment_is_refused_at_once(server):
    ev = make_eval(OurEval, server, store=judgehooks.MemoryStore())
    with pytest.raises(TypeError, match="judge must have `async complete"):
        ev.judge = object()
    ev.criteria = "Still assignable."  # the refused judge left nothing behind
    assert ev.run(input="q", output="a").results[0].passed is True


def test_a_model_with_slashes_in_its_id_keeps_them_in_db_rows_and_metrics():
    from judgehooks._base.record import split_model

    assert split_model("openrouter/meta-llama/llama-3") == ("openrouter", "meta-llama/llama-3")
    assert split_model("OpenAI/judge") == ("OpenAI", "judge") and split_model("gpt-4o") == ("", "gpt-4o")


# ---- agno's own unit-test pattern: mock the evaluator agent's run (sync) or arun (async) ----------


def _agnos_mock(ev: Any, method: str, *verdicts: Any) -> MagicMock:
    """What agno's tests/unit/eval/test_agent_as_judge_eval.py does: the evaluator agent from
    get_evaluator_agent(), its model a MagicMock, `run` (or `arun`) mocked, assigned back."""
    from agno.run.agent import RunOutput

    evaluator = ev.get_evaluator_agent()
    evaluator.model = MagicMock()
    outputs = [RunOutput(content=v) for v in verdicts]
    mocked = MagicMock(side_effect=outputs) if method == "run" else AsyncMock(side_effect=outputs)
    setattr(evaluator, method, mocked)
    ev.evaluator_agent = evaluator
    return mocked


def test_a_sync_run_is_judged_by_the_mocked_evaluator_agent_run(Eval, server):
    failed: list[Any] = []
    ev = Eval(criteria="Response must be excellent", scoring_strategy="numeric", threshold=8, on_fail=failed.append,
              telemetry=False, show_spinner=False)
    mocked = _agnos_mock(ev, "run", NumericJudgeResponse(score=9, reason="Excellent."),
                         NumericJudgeResponse(score=5, reason="Poor."))
    result = ev.run(cases=[{"input": "Test 1", "output": "Response 1"}, {"input": "Test 2", "output": "Response 2"}],
                    print_results=False)
    assert sorted((r.score, r.passed) for r in result.results) == [(5, False), (9, True)]
    assert [(e.score, e.passed) for e in failed] == [(5, False)] and result.pass_rate == 50.0
    assert mocked.call_count == 2 and server.settings.counts["judge"] == 0


@pytest.mark.anyio
async def test_an_async_arun_is_judged_by_the_mocked_evaluator_agent_arun(Eval, server):
    ev = Eval(criteria="Response must be concise", scoring_strategy="numeric", threshold=6, telemetry=False,
              show_spinner=False)
    mocked = _agnos_mock(ev, "arun", NumericJudgeResponse(score=7, reason="Mocked async evaluation."))
    result = await ev.arun(input="What is AI?", output="Artificial intelligence.", print_results=False)
    assert [(r.score, r.passed, r.reason) for r in result.results] == [(7, True, "Mocked async evaluation.")]
    assert mocked.await_count == 1 and server.settings.counts["judge"] == 0


def test_a_sync_post_hook_is_judged_by_the_mocked_evaluator_agent_run(Eval, server):
    failed: list[Any] = []
    ev = make_eval(Eval, server, scoring_strategy="binary", on_fail=failed.append)
    mocked = _agnos_mock(ev, "run", BinaryJudgeResponse(passed=False, reason="mocked in the hook"))
    Agent(model=agent_model(server), post_hooks=[ev], telemetry=False).run("q")
    assert [(e.passed, e.reason) for e in failed] == [(False, "mocked in the hook")]
    assert mocked.call_count == 1 and server.settings.counts["judge"] == 0


# ---- what agno says of its judge: the provider in the run's metrics, the tables a post hook prints ----


def openai_chat_judge(server: StubLLMServer) -> Any:
    from agno.models.openai import OpenAIChat

    return OpenAIChat(id="judge", base_url=server.base_url, api_key="k")


def test_the_run_metrics_name_the_judges_provider_as_agno_does(Eval, server):
    ev = Eval(criteria="The answer echoes the question.", model=openai_chat_judge(server), telemetry=False,
              show_spinner=False)
    out = Agent(model=agent_model(server), post_hooks=[ev], telemetry=False).run("q")
    assert [(m.provider, m.id) for m in out.metrics.details["eval_model"]] == [("OpenAI Chat", "judge")]


@pytest.mark.parametrize("numeric", [True, False], ids=["numeric", "binary"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["run", "arun"])
def test_a_post_hook_with_print_results_and_summary_prints_what_agnos_prints(server, capsys, tmp_path, monkeypatch,
                                                                          numeric, asynchronous):
    import asyncio

    monkeypatch.chdir(tmp_path)
    strategy: dict[str, Any] = {"scoring_strategy": "numeric", "threshold": 7} if numeric else {}
    printed_by: dict[str, str] = {}
    for name, Eval in (("agno", AgnoEval), ("judgehooks", OurEval)):
        ev = Eval(criteria="The answer echoes the question.", model=openai_chat_judge(server), telemetry=False,
                  print_results=True, print_summary=True, **strategy)
        agent = Agent(model=agent_model(server), post_hooks=[ev], telemetry=False)
        capsys.readouterr()
        if asynchronous:
            asyncio.run(agent.arun("What is the capital of France?"))
        else:
            agent.run("What is the capital of France?")
        printed_by[name] = capsys.readouterr().out
    assert "[ Agent As Judge Evaluation Summary ]" in printed_by["agno"]  # agno printed: the comparison means something
    assert printed_by["judgehooks"] == printed_by["agno"]
    judgehooks.drain(30)


@pytest.mark.parametrize("numeric", [True, False], ids=["numeric", "binary"])
def test_an_offline_batch_prints_the_summary_agno_prints(server, capsys, numeric):
    """(print_results too, when the texts hold no square brackets: agno's tables read them as rich
    markup, judgehooks' print them as they are; the post hook test above compares those.)"""
    strategy: dict[str, Any] = {"scoring_strategy": "numeric", "threshold": 7} if numeric else {}
    cases = [{"input": "q1", "output": "a1 [[score=9]]"}, {"input": "q2", "output": "a2 [[score=4]] [[fail]]"},
             {"input": "q3", "output": "a3 [[score=6]]"}]
    printed_by: dict[str, str] = {}
    for name, Eval in (("agno", AgnoEval), ("judgehooks", OurEval)):
        extra = {"store": judgehooks.MemoryStore(), "max_concurrency": 1} if Eval is OurEval else {}
        ev = make_eval(Eval, server, **strategy, **extra)
        capsys.readouterr()
        ev.run(cases=cases, print_summary=True)
        printed_by[name] = capsys.readouterr().out
    assert "Number of Evaluations" in printed_by["agno"]
    assert printed_by["judgehooks"] == printed_by["agno"]


def test_documented_difference_the_summary_counts_judge_errors_beside_the_pass_rate(server, capsys):
    ev = make_eval(OurEval, server, store=judgehooks.MemoryStore(), retries=0)
    ev.run(cases=[{"input": "q", "output": "a"}, {"input": "q", "output": "a [[judge_status=500]]"}],
           print_summary=True)
    out = capsys.readouterr().out
    assert "Pass Rate" in out and "100.0%" in out and "Errors" in out and "1 (not in the pass rate)" in out


def test_documented_difference_printed_text_is_shown_as_it_is_not_read_as_markup(server):
    fields = ("q [bold]loud[/bold]", "a [red]x[/red]", "c", None, "r", True)
    ours, theirs = printed(judgehooks.AgentAsJudgeEvaluation(*fields)), printed(AgentAsJudgeEvaluation(*fields))
    assert "[bold]loud[/bold]" in ours and "[red]x[/red]" in ours  # a run's text cannot restyle or hide itself
    assert "[bold]" not in theirs and "loud" in theirs  # agno's table reads it as rich markup


def test_documented_difference_background_grading_prints_nothing(server, capsys, tmp_path):
    store = judgehooks.MemoryStore()
    ev = make_eval(OurEval, server, store=store, run_in_background=True, outbox=str(tmp_path / "o.db"),
                   print_results=True, print_summary=True)
    Agent(model=agent_model(server), post_hooks=[ev], telemetry=False).run("q")
    assert judgehooks.drain(30) and [r.status for r in store.records] == ["passed"]
    assert "Agent As Judge" not in capsys.readouterr().out
