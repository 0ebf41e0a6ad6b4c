"""Judges other than a litellm model string: env-configured litellm, agno Models, evaluator agents; db=."""

from __future__ import annotations

import pytest
from agno.agent import Agent
from agno.models.openai.like import OpenAILike

from judgehooks import AgentAsJudgeEval


def test_litellm_provider_environment_variables_work(make_agent, store, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_BASE", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    judge = AgentAsJudgeEval(criteria="c", model="openai/judge", store=store, retry_backoff=0.01)
    out = make_agent(judge).run("q [[fail]]")
    [r] = store.records
    assert (r.run_id, r.status) == (out.run_id, "failed")


def test_an_agno_model_can_judge(make_agent, store, server):
    judge = AgentAsJudgeEval(criteria="c", scoring_strategy="numeric", threshold=6, store=store,
                             model=OpenAILike(id="judge", base_url=server.base_url, api_key="k"))
    out = make_agent(judge).run("q [[score=5]]")
    [r] = store.records
    assert (r.run_id, r.status, r.score) == (out.run_id, "failed", 5)
    assert r.judge_model.endswith("/judge")


def test_an_evaluator_agent_can_judge(make_agent, store, server):
    evaluator = Agent(model=OpenAILike(id="judge", base_url=server.base_url, api_key="k"), telemetry=False)
    judge = AgentAsJudgeEval(criteria="c", evaluator_agent=evaluator, store=store)
    make_agent(judge).run("q")
    [r] = store.records
    assert r.status == "passed" and r.reason.startswith("stub judge says")
    from agno.eval.agent_as_judge import BinaryJudgeResponse

    assert evaluator.output_schema is BinaryJudgeResponse  # agno's verdict schema, set as agno sets it


def test_db_parameter_mirrors_verdicts_into_agnos_eval_table(make_judge, make_agent, store, tmp_path):
    from agno.db.sqlite import SqliteDb

    db = SqliteDb(db_file=str(tmp_path / "agno.db"))
    agent = make_agent(make_judge(db=db, name="helpful"), id="agent-db")
    out = agent.run("q [[fail]]")
    [r] = store.records
    runs = db.get_eval_runs(agent_id="agent-db")
    assert len(runs) == 1
    run = runs[0]
    assert (run.run_id, run.name, run.eval_type.value) == (r.id, "helpful", "agent_as_judge")
    ours = run.eval_data["judgehooks"]["record"]
    assert ours["run_id"] == out.run_id and ours["status"] == "failed"
    assert run.eval_data["results"][0]["passed"] is False


def test_built_in_judges_declare_the_optional_methods_instead_of_being_probed():
    import anyio

    from judgehooks import LiteLLMJudge
    from judgehooks._judges.base import BaseJudge
    from judgehooks._judges.process import ProcessJudge

    class Minimal(BaseJudge):
        model = "minimal/judge"

        async def complete(self, request):
            raise NotImplementedError

    from judgehooks import AgnoJudge

    for judge in (LiteLLMJudge("openai/x"), ProcessJudge(LiteLLMJudge("openai/x")),
                  AgnoJudge(model=OpenAILike(id="x", api_key="k")), Minimal()):
        assert isinstance(judge, BaseJudge)
    with pytest.raises(TypeError):
        BaseJudge()  # complete is the one method a judge must have
    minimal = Minimal()
    assert minimal.warm_up() is None
    assert anyio.run(minimal.prepare) is None and anyio.run(minimal.aclose) is None


def test_a_judge_process_copies_and_pickles_without_its_helper(make_agent, server):
    """The helper a `ProcessJudge` last used is a cache, not state: a copy or a pickle of the judge
    (a live pipe and threads cannot be either) finds its helper process again."""
    import copy
    import pickle

    from judgehooks import AgentAsJudgeEval, LiteLLMJudge, MemoryStore
    from judgehooks._judges.process import ProcessJudge

    store = MemoryStore()
    evaluator = AgentAsJudgeEval(criteria="c", store=store, judge_process=True,
                                 judge=LiteLLMJudge("openai/judge", api_base=server.base_url, api_key="k"))
    make_agent(evaluator).run("q")
    judge = evaluator.judge
    assert isinstance(judge, ProcessJudge) and judge._last is not None
    for twin in (copy.deepcopy(judge), pickle.loads(pickle.dumps(judge))):
        assert twin._last is None and twin._ensure() is judge._ensure()
    assert [r.status for r in store.records] == ["passed"]


def test_a_patched_base_prepare_is_awaited(monkeypatch):
    """A judge whose `prepare` is the base's empty one is not awaited on each call; one patched on
    the base class afterwards (a test's) is."""
    import anyio

    from judgehooks import EvalContext
    from judgehooks._judges.base import BaseJudge, JudgeReply
    from judgehooks._judges.call import JudgeCall

    class Plain(BaseJudge):
        model = "plain/judge"

        async def complete(self, request):
            return JudgeReply(text=f'{{"passed": true, "reason": "ok", "nonce": "{request.nonce}"}}')

    prepared = []

    async def fake(self):
        prepared.append(self.model)

    call = JudgeCall(judge=Plain(), criteria="c", mode="binary", threshold=None)
    assert anyio.run(call.ask, EvalContext(input="q", output="a")).passed is True and prepared == []
    monkeypatch.setattr(BaseJudge, "prepare", fake)
    assert anyio.run(call.ask, EvalContext(input="q", output="a")).passed is True and prepared == ["plain/judge"]
