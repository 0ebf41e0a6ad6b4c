"""Evaluators are dataclasses that declare only their own settings; deployment settings
(store, callbacks, background, sampling, gates) are one validated HookSettings."""

from __future__ import annotations

import abc
import dataclasses

import pytest
from conftest import wait_for

import judgehooks
from judgehooks import (
    AgentAsJudgeEval,
    Contains,
    EvalContext,
    Evaluator,
    Group,
    MemoryStore,
    Ordered,
    Regex,
    Rubric,
    SessionJudge,
)
from judgehooks._evaluators.function import FunctionEvaluator
from judgehooks._evaluators.spec import rebuild
from judgehooks._hooks.deployment import Deployment, DeploymentKeywords, OwnKeywords
from judgehooks._hooks.settings import HookSettings

HOOK = HookSettings.names()


@dataclasses.dataclass
class MaxChars(Evaluator):
    """A user's evaluator in the dataclass style: one field, one method."""

    limit: int

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit!r}")

    def evaluate(self, ctx: EvalContext) -> bool:
        return len(ctx.output) <= self.limit


def test_a_dataclass_subclass_takes_its_own_fields_and_every_deployment_setting(make_agent):
    store, failed = MemoryStore(), []
    check = MaxChars(3, name="short", store=store, on_fail=failed.append)
    out = make_agent(check).run("a question long enough to get a long echo")
    [record] = store.records
    assert (record.run_id, record.evaluator, record.status) == (out.run_id, "short", "failed")
    wait_for(lambda: failed == [record])
    assert check.limit == 3 and check.hook_settings.store is store


def test_a_dataclass_subclass_validates_its_fields_and_the_settings_once():
    with pytest.raises(ValueError, match="limit must be >= 1"):
        MaxChars(0)
    with pytest.raises(ValueError, match="overload must be one of"):
        MaxChars(3, overload="sometimes")
    with pytest.raises(TypeError, match="on_fail must be a callable"):
        Regex("x", on_fail="page me")


@pytest.mark.parametrize("cls", [Regex, Contains, MaxChars, Group, Ordered, Rubric, AgentAsJudgeEval])
def test_built_in_evaluators_declare_only_their_own_fields(cls):
    """The deployment settings are declared once, by `Deployment`, and every evaluator inherits them."""
    declared = {name for klass in cls.__mro__ if klass not in (Deployment, object)
                for name in vars(klass).get("__annotations__", {})}
    assert not declared & HOOK, f"{cls.__name__} declares deployment settings {sorted(declared & HOOK)}"
    assert {f.name for f in dataclasses.fields(cls)} >= HOOK


def test_agent_as_judge_eval_keeps_agnos_fields_and_maps_the_rest_onto_hook_settings():
    from agno.eval import AgentAsJudgeEval as AgnoEval

    ours = {f.name for f in dataclasses.fields(AgentAsJudgeEval)}
    assert {f.name for f in dataclasses.fields(AgnoEval)} <= ours  # agno's order is the signature's (test_config)
    store = MemoryStore()
    judge = AgentAsJudgeEval(criteria="c", model="openai/m", api_key="k", store=store, on_fail=print,
                             sample_rate=0.5, max_queue=7)
    settings = judge.hook_settings
    assert (settings.store, settings.on_fail, settings.sample_rate, settings.max_queue) == (store, print, 0.5, 7)
    assert "k" not in repr(judge)  # the key is not a field shown in logs


def test_composite_members_build_no_store_of_their_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JUDGEHOOKS_DB", raising=False)
    store = MemoryStore()
    group = Group([Regex("a", name="has-a"), Contains("b", name="has-b")], store=store)
    result = group.run(input="q", output="ab")
    assert [r.status for r in result.records] == ["passed"] and len(store.records) == 1
    assert list(tmp_path.iterdir()) == []  # no default SQLite file for the members


def test_spec_and_default_name_derive_from_the_fields_and_rebuild_the_same_evaluator():
    check = Regex("^ok", flags="i", must_match=False)
    spec = check.spec()
    assert spec == {"class": "Regex", "settings": {"pattern": "^ok", "flags": "i", "must_match": False,
                                                   "timeout": 1.0, "engine": "regex",
                                                   "name": check.evaluator_name, "threshold": None}}
    copy = rebuild(spec, store=MemoryStore(), outbox=False, run_in_background=False)
    assert (type(copy), copy.pattern, copy.flags, copy.must_match, copy.evaluator_name) == (
        Regex, "^ok", "i", False, check.evaluator_name)
    assert Regex("^ok", flags="i", must_match=False).evaluator_name == check.evaluator_name
    assert Regex("^no").evaluator_name != check.evaluator_name
    assert MaxChars(3).spec() is None  # user code: resume needs --import


def test_evaluators_compare_by_identity_so_they_can_key_a_group():
    a, b = Regex("x", name="a"), Regex("x", name="b")
    assert a != b and len({a, b}) == 2
    group = Group({a: 2.0, b: 1.0}, store=MemoryStore())
    assert group.weights == (2.0, 1.0)


def test_a_hand_written_init_still_works_and_forgetting_super_init_is_named():
    class Legacy(Evaluator):
        def __init__(self, limit: int, **hook):
            self.limit = limit
            super().__init__(**hook)

        def evaluate(self, ctx):
            return len(ctx.output) <= self.limit

    legacy = Legacy(2, name="legacy", store=MemoryStore())
    assert legacy.run(input="q", output="abc").records[0].status == "failed"
    assert judgehooks.drain(10)


@pytest.mark.parametrize("cls", [Regex, Contains, MaxChars, Group, Ordered, Rubric, SessionJudge, FunctionEvaluator])
def test_help_and_ides_see_the_own_fields_and_every_deployment_keyword_natively(cls):
    """No synthesised signature: a dataclass evaluator's generated __init__ names every deployment
    keyword with its type, as help(), IDEs and type checkers read it. (A user's mypy then sees them
    too, and a misspelled one is its error: tests/typing/users_keywords.py, checked by `.ci/run`.)"""
    import inspect

    assert "__signature__" not in vars(type(cls)) and "__signature__" not in vars(cls)
    assert type(cls) is abc.ABCMeta  # agno's BaseEval's; nothing of ours between a call and __init__
    params = inspect.signature(cls).parameters
    hints = {f.name: f.type for f in dataclasses.fields(Deployment)}
    assert {n: (params[n].kind, params[n].annotation) for n in HOOK} == {
        n: (inspect.Parameter.KEYWORD_ONLY, hints[n]) for n in HOOK}
    assert {"name", "threshold"} <= set(params)


def test_agent_as_judge_eval_takes_agnos_signature_then_the_rest_as_typed_keywords():
    """agno's flat signature, in agno's order, then judgehooks' deployment keywords as PEP 692
    `**deployment: Unpack[OwnKeywords]`: the TypedDict holds Deployment's other names and types."""
    import inspect

    params = inspect.signature(AgentAsJudgeEval).parameters
    rest = params["deployment"]
    assert rest.kind is inspect.Parameter.VAR_KEYWORD and rest.annotation == "Unpack[OwnKeywords]"
    hints = {f.name: f.type for f in dataclasses.fields(Deployment)}
    agnos = {n for n in HOOK if n in params}
    assert agnos == {"on_fail", "print_summary", "print_results", "file_path_to_save_results", "db",
                     "run_in_background"}
    assert spelled(OwnKeywords) == {n: t for n, t in hints.items() if n not in agnos}
    assert spelled(DeploymentKeywords) == hints


def spelled(typed: type) -> dict[str, str]:
    """A TypedDict's annotations as written (they are forward references under `from __future__`)."""
    return {n: getattr(t, "__forward_arg__", t) for n, t in typed.__annotations__.items()}


def test_a_misspelled_keyword_is_refused_by_the_constructor_itself():
    with pytest.raises(TypeError, match="unexpected keyword argument 'stor'"):
        Regex("^ok", stor=MemoryStore())
    with pytest.raises(TypeError, match="unexpected keyword argument 'stor'"):
        AgentAsJudgeEval(criteria="c", stor=MemoryStore())


def test_hook_settings_are_read_only_once_validated():
    settings = Regex("x", max_queue=5).hook_settings
    with pytest.raises(dataclasses.FrozenInstanceError, match="max_queue"):
        settings.max_queue = 6
    assert settings.max_queue == 5


def test_records_an_earlier_process_spilled_are_redelivered_when_the_evaluator_is_built(tmp_path):
    """The store is built on first use, except where building it resumes something a dead process
    left: a store that spills re-delivers its waiting records as soon as the evaluator exists."""
    from judgehooks import EvalRecord
    from judgehooks.stores._spill import SpillFile, store_key

    store, spill = MemoryStore(), tmp_path / "outbox.db"
    left = [EvalRecord(id=f"left-{i}", status="passed", evaluator="e", mode="binary", passed=True) for i in range(3)]
    SpillFile(spill).append(store_key(store), left)
    Regex("x", store=store, spill=spill)  # constructed; no run graded yet
    assert judgehooks.drain(30)
    assert sorted(r.id for r in store.records) == ["left-0", "left-1", "left-2"]
    member = Regex("y")  # the default local store neither spills nor is built until used
    assert member._shell._wiring is None


def test_a_check_setting_assigned_later_is_checked_and_takes_effect():
    store = judgehooks.MemoryStore()
    check = judgehooks.Regex(r"\d", store=store, name="digits")
    assert check.run(input="q", output="abc").results[0].status == "failed"
    check.pattern = r"[a-z]"
    assert check.run(input="q", output="abc").results[0].status == "passed"
    with pytest.raises(ValueError, match="pattern must be a non-empty regular expression string"):
        check.pattern = ""
    assert check.pattern == r"[a-z]" and check.run(input="q", output="abc").results[0].status == "passed"
    check.name = "letters"  # inline: the name may change, records follow it
    assert check.run(input="q", output="x").results[0].evaluator == "letters"


def test_a_threshold_assigned_later_makes_a_check_numeric():
    @dataclasses.dataclass
    class Length(Evaluator):
        def evaluate(self, ctx):
            return float(len(ctx.output))

    length = Length(store=judgehooks.MemoryStore(), name="length")
    length.threshold = 3
    [record] = length.run(input="q", output="ab").results
    assert (record.mode, record.threshold, record.status) == ("numeric", 3, "failed")
