"""Judge templates: the registry, the built-ins, and a built judge grading real runs."""

from __future__ import annotations

import pytest

from judgehooks import EvalContext, JudgeTemplate, add_judge, get_judge, list_judges
from judgehooks._evaluators import templates as _templates
from judgehooks._judges.prompt import build_request

BUILT_INS = ("faithfulness", "helpfulness", "safety", "tone")


@pytest.fixture(autouse=True)
def _registry_restored():
    saved = dict(_templates._registry)
    yield
    _templates._registry.clear()
    _templates._registry.update(saved)


@pytest.fixture
def connection(server, store):
    return {"model": "openai/judge", "api_base": server.base_url, "api_key": "k", "store": store, "timeout": 10}


def test_built_ins_are_listed_with_their_criteria():
    judges = {t.name: t for t in list_judges()}
    assert set(BUILT_INS) <= set(judges)
    for name in BUILT_INS:
        assert len(judges[name].criteria) > 150 and judges[name].description
    assert (judges["helpfulness"].scoring_strategy, judges["helpfulness"].threshold) == ("numeric", 7)
    assert judges["faithfulness"].context_key == "context"


def test_a_built_in_judge_grades_a_live_run(make_agent, connection, store):
    agent = make_agent(get_judge("helpfulness", **connection))
    out = agent.run("how do I reset my password [[score=5]]")
    (record,) = store.records
    assert (record.evaluator, record.mode, record.threshold, record.score, record.status) == (
        "helpfulness", "numeric", 7, 5, "failed")
    helpfulness = next(t for t in list_judges() if t.name == "helpfulness")
    assert record.run_id == out.run_id and record.criteria == helpfulness.criteria


def test_faithfulness_reads_the_context_the_run_was_given(make_agent, connection, store):
    agent = make_agent(get_judge("faithfulness", **connection))
    agent.run("when do we open", metadata={"context": "The shop opens at 9."})
    agent.run("when do we close")
    grounded, missing = store.records
    assert grounded.status == "passed" and grounded.metadata["context"] == "The shop opens at 9."
    assert (missing.status, missing.error_type) == ("error", "MissingContext")
    assert "run metadata has no 'context'" in missing.error_message


def test_the_given_context_is_fenced_as_data():
    request = build_request(EvalContext(input="q", output="a"), criteria="c", mode="binary",
                            context="The shop opens at 9.", nonce="n0nce")
    assert "<<<GIVEN-CONTEXT-n0nce>>>\nThe shop opens at 9.\n<<<END-GIVEN-CONTEXT-n0nce>>>" in request.messages[1][
        "content"]


def test_overrides_win_over_the_template(connection):
    judge = get_judge("tone", threshold=9, gate=True, **connection)
    assert (judge.threshold, judge.scoring_strategy, judge.evaluator) == (9, "numeric", "tone")


def test_add_judge_registers_and_refuses_a_taken_name(connection):
    template = add_judge("concise", "The answer is at most three sentences.", guidelines="Count sentences.")
    assert isinstance(template, JudgeTemplate) and template.guidelines == ("Count sentences.",)
    assert get_judge("concise", **connection).criteria == "The answer is at most three sentences."
    with pytest.raises(ValueError, match="'concise' is already registered; pass replace=True"):
        add_judge("concise", "Another text.")
    assert add_judge("concise", "Two sentences at most.", replace=True).criteria == "Two sentences at most."


def test_unknown_judge_names_the_registered_ones():
    with pytest.raises(ValueError, match="no judge named 'helpfulnes'; registered: faithfulness, helpfulness"):
        get_judge("helpfulnes")


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"name": "", "criteria": "c"}, ValueError, "name must be a non-empty string"),
    ({"name": "x", "criteria": " "}, ValueError, "criteria must be a non-empty string"),
    ({"name": "x", "criteria": "c", "scoring_strategy": "stars"}, ValueError, "scoring_strategy must be"),
    ({"name": "x", "criteria": "c", "scoring_strategy": "numeric", "threshold": 11}, ValueError,
     "threshold must be between 1 and 10"),
    ({"name": "x", "criteria": "c", "guidelines": 3}, TypeError, "^guidelines must be a string or a list"),
    ({"name": "x", "criteria": "c", "context_key": ""}, ValueError, "context_key must be"),
])
def test_add_judge_checks_its_settings(kwargs, error, message):
    with pytest.raises(error, match=message):
        add_judge(**kwargs)
