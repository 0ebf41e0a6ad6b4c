"""Construction: agno-compatible parameters, and clear errors for bad settings."""

from __future__ import annotations

import inspect

import pytest
from agno.eval import AgentAsJudgeEval as AgnoEval

from judgehooks import AgentAsJudgeEval, MemoryStore


def make(**kw):
    kw.setdefault("criteria", "Be helpful.")
    kw.setdefault("store", MemoryStore())
    return AgentAsJudgeEval(**kw)


def test_every_agno_parameter_is_accepted_with_the_same_default():
    ours = inspect.signature(AgentAsJudgeEval.__init__).parameters
    for name, param in inspect.signature(AgnoEval).parameters.items():
        assert name in ours, f"agno parameter {name!r} missing"
        if name not in {"model", "debug_mode"}:
            assert ours[name].default == param.default, name


def test_agno_positional_order_is_kept():
    ours = [p for p in inspect.signature(AgentAsJudgeEval.__init__).parameters if p != "self"]
    agno = list(inspect.signature(AgnoEval).parameters)
    assert ours[: len(agno)] == agno


def test_it_is_an_agno_base_eval():
    from agno.eval.base import BaseEval

    assert isinstance(make(), BaseEval)


@pytest.mark.parametrize("threshold", [0, 11, -1, 10.5, "7", True])
def test_threshold_out_of_range(threshold):
    with pytest.raises(ValueError, match="threshold must be between 1 and 10"):  # agno's words
        make(threshold=threshold, scoring_strategy="numeric")


def test_unknown_scoring_strategy():
    with pytest.raises(ValueError, match="scoring_strategy must be 'binary' or 'numeric', got 'stars'"):
        make(scoring_strategy="stars")


@pytest.mark.parametrize("criteria", ["", "   ", None])
def test_empty_criteria(criteria):
    with pytest.raises(ValueError, match="criteria must be a non-empty string"):
        make(criteria=criteria)


@pytest.mark.parametrize("name", ["on_fail", "on_error"])
def test_non_callable_callbacks(name):
    with pytest.raises(TypeError, match=f"{name} must be a callable"):
        make(**{name: "page-oncall"})


@pytest.mark.parametrize("timeout", [-1, 0, "10"])
def test_bad_timeout(timeout):
    with pytest.raises(ValueError, match="timeout must be a number > 0"):
        make(timeout=timeout)


@pytest.mark.parametrize("kw, message", [
    ({"retries": -1}, "retries must be an integer >= 0"),
    ({"max_concurrency": 0}, "max_concurrency must be an integer >= 1"),
    ({"name": ""}, "name must be a non-empty string"),
])
def test_other_bad_numbers_and_names(kw, message):
    with pytest.raises(ValueError, match=message):
        make(**kw)


def test_bad_model_and_store_types():
    with pytest.raises(TypeError, match="model must be a litellm model string"):
        make(model=42)
    with pytest.raises(TypeError, match="store must implement"):
        make(store=object())
    with pytest.raises(TypeError, match="additional_guidelines"):
        make(additional_guidelines=[1, 2])


def test_pre_check_raises_a_clear_error():
    with pytest.raises(ValueError, match="post_hooks, not pre_hooks"):
        make().pre_check(None)


def test_sqlite_store_in_a_missing_directory_is_refused():
    from judgehooks import SQLiteStore

    with pytest.raises(ValueError, match="does not exist"):
        SQLiteStore("/nonexistent-dir-for-judgehooks/evals.db")


def test_default_store_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGEHOOKS_DB", str(tmp_path / "env.db"))
    judge = AgentAsJudgeEval(criteria="c")
    assert judge.store.path == str(tmp_path / "env.db")
    monkeypatch.delenv("JUDGEHOOKS_DB")
    monkeypatch.chdir(tmp_path)
    assert AgentAsJudgeEval(criteria="c").store.path == "judgehooks.db"


def test_default_name_is_stable_and_distinguishes_settings():
    a, b = make(criteria="x"), make(criteria="x")
    c = make(criteria="x", scoring_strategy="numeric")
    assert a.evaluator == b.evaluator != c.evaluator
    assert make(name="helpful").evaluator == "helpful"


def test_deep_copies_share_the_eval():
    import copy

    judge = make()
    assert copy.deepcopy([judge])[0] is judge
