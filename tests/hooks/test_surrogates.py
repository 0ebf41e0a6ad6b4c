"""A lone UTF-16 surrogate ("\\ud83d", half an emoji) anywhere in a run: UTF-8 cannot encode it, so
before the fix SQLite, JSONL and the outbox refused the record and a gate let the answer through.
Now the snapshot makes text storable once (U+FFFD), and every record is storable too."""

from __future__ import annotations

import asyncio
import json

import pytest
from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from pydantic import BaseModel

import judgehooks
from judgehooks import EvalRecord, JsonlStore, SQLiteStore
from judgehooks._base.text import storable
from judgehooks.testing import FakeJudge

LONE = "\ud83d"


def _query(store) -> list[EvalRecord]:
    return asyncio.run(store.query(limit=None))


def only_record(records: list[EvalRecord]) -> EvalRecord:
    assert len(records) == 1, records
    return records[0]


def test_storable_replaces_lone_surrogates_and_joins_pairs():
    assert storable(f"a{LONE}b") == "a\ufffdb"
    assert storable("\ud83d\ude00") == "\U0001f600" and storable("\udc00x") == "\ufffdx"
    text = "plain é 中"
    assert storable(text) is text


def test_every_record_field_is_made_storable_however_the_record_is_built():
    """A record's field names need no walk, its values do: top-level text, nested metadata and
    details (keys too), an error message. Built as EvalRecord(**fields), by the graders' one-dict
    builder, and read back from a dict, each gives the same storable record."""
    from judgehooks._base.record import new_record

    fields = {"id": "r1", "status": "error", "evaluator": f"e{LONE}", "mode": "binary", "reason": None,
              "output": f"out{LONE}", "metadata": {f"k{LONE}": [f"v{LONE}", 1, None]},
              "details": {"nested": {"deep": f"d{LONE}"}}, "error_message": f"bad{LONE}"}
    built = [EvalRecord(**fields), new_record(dict(fields)), EvalRecord.model_validate(dict(fields))]
    for record in built:
        assert record.evaluator == "e\ufffd" and record.output == "out\ufffd"
        assert record.metadata == {"k\ufffd": ["v\ufffd", 1, None]}
        assert record.details == {"nested": {"deep": "d\ufffd"}} and record.error_message == "bad\ufffd"
        json.dumps(record.model_dump(mode="json")).encode()  # all of it is UTF-8 now
    clean = {"id": "r2", "status": "passed", "evaluator": "e", "mode": "binary", "metadata": {"a": "b"}}
    assert new_record(dict(clean)).metadata == {"a": "b"}


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_inline_grading_stores_exactly_one_record(make_judge, make_agent, tmp_path, kind):
    store = SQLiteStore(str(tmp_path / "evals.db")) if kind == "sqlite" else JsonlStore(str(tmp_path / "evals.jsonl"))
    agent = make_agent(make_judge(store=store))
    out = agent.run("tell me [[half_emoji]]", user_id=f"user {LONE}", metadata={"note": f"meta {LONE}", LONE: [LONE]})
    record = only_record(_query(store))
    assert (record.run_id, record.status) == (out.run_id, "passed")
    assert out.content.endswith(LONE) and record.output.endswith("\ufffd") and record.user_id == "user \ufffd"
    assert record.metadata["note"] == "meta \ufffd" and record.metadata["\ufffd"] == ["\ufffd"]


def test_background_outbox_takes_the_job_and_stores_one_record(make_judge, make_agent, tmp_path):
    store = SQLiteStore(str(tmp_path / "evals.db"))
    judge = make_judge(store=store, run_in_background=True, outbox=str(tmp_path / "outbox.db"))
    out = make_agent(judge).run("tell me [[half_emoji]]", metadata={"note": LONE})
    assert judgehooks.drain(30)
    record = only_record(_query(store))
    assert (record.run_id, record.status) == (out.run_id, "passed")
    assert record.output.endswith("\ufffd") and record.metadata["note"] == "\ufffd"


def test_offline_grading_of_an_input_with_a_lone_surrogate_stores_one_record(make_judge, tmp_path):
    store = JsonlStore(str(tmp_path / "evals.jsonl"))
    result = make_judge(store=store).run(input=f"in {LONE}", output=f"out {LONE}")
    record = only_record(_query(store))
    assert (record.input, record.output, record.status) == ("in \ufffd", "out \ufffd", "passed")
    assert result.results[0].passed


def test_a_judge_reason_with_a_lone_surrogate_is_stored(make_agent, tmp_path):
    store = SQLiteStore(str(tmp_path / "evals.db"))
    judge = judgehooks.AgentAsJudgeEval(criteria="c", judge=FakeJudge('{"passed": false, "reason": "bad \\ud83d"}'),
                                        store=store)
    make_agent(judge).run("q")
    record = only_record(_query(store))
    assert (record.status, record.reason) == ("failed", "bad \ufffd")


class Answer(BaseModel):
    title: str


def schema_agent(server, judge) -> Agent:
    model = OpenAILike(id="schema-agent", base_url=server.base_url, api_key="test-key")
    return Agent(model=model, output_schema=Answer, post_hooks=[judge], telemetry=False)


def test_output_schema_answer_with_a_lone_surrogate_gives_one_record(make_judge, server, tmp_path):
    store = SQLiteStore(str(tmp_path / "evals.db"))
    out = schema_agent(server, make_judge(store=store)).run('[[raw]]{"title": "put \\ud83d here"}')
    assert isinstance(out.content, Answer) and out.content.title == f"put {LONE} here"  # agno kept the surrogate
    record = only_record(_query(store))
    assert record.status == "passed" and json.loads(record.output) == {"title": "put \ufffd here"}


def test_the_gate_still_blocks_an_output_schema_answer_with_a_lone_surrogate(make_judge, server, tmp_path):
    store = SQLiteStore(str(tmp_path / "evals.db"))
    gate = make_judge(store=store, gate=True, fallback="blocked")
    out = schema_agent(server, gate).run('[[raw]]{"title": "put \\ud83d here [[fail]]"}')
    assert out.content == "blocked" and getattr(out.status, "value", out.status) == "ERROR"
    assert only_record(_query(store)).status == "failed"


def test_a_namedtuple_or_dict_subclass_in_the_metadata_still_gives_one_storable_record(make_judge, make_agent):
    import collections

    Point = collections.namedtuple("Point", "x y")
    store = judgehooks.MemoryStore()
    make_agent(make_judge(store=store)).run(
        "question", metadata={"p": Point("\ud83d", 2), "o": collections.OrderedDict(a="\ud83d")})
    [record] = store.records
    assert record.status == "passed"
    assert record.metadata["p"] == ["\ufffd", 2] and record.metadata["o"] == {"a": "\ufffd"}


@pytest.mark.parametrize(("build", "where"), [
    (lambda: judgehooks.AgentAsJudgeEval(criteria=f"polite {LONE}", model="openai/x"), "criteria"),
    (lambda: judgehooks.AgentAsJudgeEval(criteria=f"polite {LONE}", model="openai/x", name="n"), "criteria"),
    (lambda: judgehooks.AgentAsJudgeEval(criteria="polite", additional_guidelines=["ok", f"no {LONE}"],
                                         model="openai/x", name="n"), "additional_guidelines[1]"),
    (lambda: judgehooks.Rubric(criteria=[{"name": "a", "description": f"x {LONE}"}], model="openai/x"),
     "criteria[0].description"),
    (lambda: judgehooks.SessionJudge(criteria=f"x {LONE}", model="openai/x"), "criteria"),
    (lambda: judgehooks.Contains(f"ab{LONE}"), "values[0]"),
    (lambda: judgehooks.Contains("ab", name=f"n{LONE}"), None),  # the name: every record id hashes it
    (lambda: judgehooks.AgentAsJudgeEval(criteria="polite", model="openai/x", name=f"n{LONE}"), None),
], ids=["unnamed", "named", "guideline", "rubric", "session", "check", "check-name", "judge-name"])
def test_a_lone_surrogate_in_an_evaluators_own_text_is_refused_by_name(build, where):
    """The developer's own text (criteria, guidelines, a rubric line, a check's needle) is no run's:
    it is not mended, it is refused at construction, saying which setting and where, instead of a
    bare UnicodeEncodeError from a hash."""
    with pytest.raises(ValueError, match="lone surrogate") as caught:
        build()
    if where is not None:
        assert f"evaluator's {where} (character " in str(caught.value)
