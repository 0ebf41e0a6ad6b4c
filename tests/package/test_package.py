"""Package surface: lazy litellm import, the pinned public namespace, logging without printing."""

from __future__ import annotations

import subprocess
import sys

import pytest
from structlog.testing import capture_logs

import judgehooks


def test_import_does_not_import_litellm():
    code = "import sys, judgehooks; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _fresh(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_the_face_loads_each_name_on_first_use():
    """`import judgehooks` loads no part of the package; a name loads the modules it needs, and no
    others: the drop-in AgentAsJudgeEval does not bring in the alerts, the CLI, sessions or the
    stores it does not use."""
    loaded = "import sys; print(sorted(m for m in sys.modules if m.startswith('judgehooks')))"
    assert _fresh(f"import judgehooks; {loaded}") == str(["judgehooks", "judgehooks._base", "judgehooks._base.lazy"])
    after = _fresh(f"from judgehooks import AgentAsJudgeEval; {loaded}")
    assert "judgehooks._evaluators.llm" in after
    for unused in ("judgehooks._alerts", "judgehooks._cli", "judgehooks._evaluators.session",
                   "judgehooks.stores._postgres", "judgehooks._grading.sessions"):
        assert f"'{unused}'" not in after, unused
    assert set(dir(judgehooks)) >= set(judgehooks.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        judgehooks.Nope  # noqa: B018


def test_a_fresh_process_can_rebuild_every_builtin_evaluator_from_a_spec():
    """Workers and `judgehooks resume` rebuild evaluators by class name; with the face loading
    nothing, the registry must still hold every built-in class in a process that imported none."""
    code = "from judgehooks._evaluators.spec import rebuildable; print(' '.join(rebuildable()))"
    names = set(_fresh(code).split())
    for name in ("AgentAsJudgeEval", "Rubric", "ScorerEval", "SessionJudge", "Regex", "Contains", "Ensemble"):
        assert name in names, name
    every_module = ("import importlib, pkgutil, judgehooks._evaluators as e; "
                    "[importlib.import_module(f'{e.__name__}.{m.name}') for m in pkgutil.iter_modules(e.__path__)]; "
                    + code)
    assert names == set(_fresh(every_module).split())  # a new evaluator module is in spec._BUILTIN_MODULES


def test_public_names_are_pinned():
    assert judgehooks.__all__ == (
        "AgentAsJudgeEval", "AgentAsJudgeEvaluation", "AgentAsJudgeResult", "AgnoDbStore", "AgnoJudge", "AlignResult",
        "BadOutcome",
        "BaseJudge", "BaseStore", "BinaryJudgeResponse", "Borderline", "Budget", "Calibration", "Consistency",
        "Contains", "Criterion", "Ensemble", "EvalContext", "EvalRecord",
        "Evaluator", "EvaluatorError", "EvaluatorUnavailable", "ExactMatch", "FanoutStore", "Feedback", "Group",
        "HookSettings",
        "IsJSON", "JSONSchema", "JsonlStore", "Judge", "JudgeError", "JudgeProcessDied", "JudgeReply", "JudgeRequest",
        "JudgeTemplate", "JudgeUnavailable", "JudgehooksError", "Label", "LabelMatch", "LiteLLMJudge",
        "LocalModelUnavailable", "LogNotifier", "MalformedVerdict", "MatchesModel", "MemberError", "MemoryStore",
        "MissingContext", "MissingExpected", "MissingMetrics", "NotContains", "NotRebuildable", "NumericJudgeResponse",
        "OptimizeResult", "Ordered", "Outcome",
        "PostgresStore", "QualityAlert", "RecordFilter", "RedactionError", "Regex", "RemoteJudgeError",
        "RetryPolicy", "Rubric", "RunUsage", "SQLiteStore", "ScorerEval", "SessionJudge", "Shadow", "ShadowReport",
        "SlackNotifier", "Store",
        "StoreError", "ToolCall", "ToolUse", "Verdict", "VerdictCut", "WebhookNotifier", "WindowedAlert", "__version__",
        "aalign_judge", "acalibrate", "aconsistency", "add_judge", "adrain", "aend_session", "afeedback", "alabel",
        "align_judge",
        "aoptimize", "ashadow_report", "astream", "calibrate",
        "consistency", "drain", "end_session",
        "evaluator", "feedback", "get_judge", "label", "lifespan", "list_judges", "optimize", "parse_verdict",
        "shadow_report", "stats",
        "stream",
    )
    for name in judgehooks.__all__:
        assert hasattr(judgehooks, name), name


def test_one_structured_event_per_evaluation_and_nothing_printed(make_judge, make_agent, capsys):
    agent = make_agent(make_judge(scoring_strategy="numeric"), id="agent-log")
    with capture_logs() as logs:
        out = agent.run("q [[score=4]]", session_id="s", user_id="u")
    events = [e for e in logs if e["event"] == "evaluation"]
    assert len(events) == 1
    e = events[0]
    assert (e["status"], e["score"], e["agent_id"], e["run_id"], e["session_id"], e["user_id"]) == (
        "failed", 4, "agent-log", out.run_id, "s", "u")
    assert e["latency_ms"] > 0 and e["log_level"] == "info"
    captured = capsys.readouterr()
    assert "stub judge" not in captured.out + captured.err


def test_fake_judge_drives_the_core_without_http():
    from judgehooks import AgentAsJudgeEval, MemoryStore
    from judgehooks.testing import FakeJudge

    fake = FakeJudge('{"score": 2, "reason": "bad"}')
    judge = AgentAsJudgeEval(criteria="c", scoring_strategy="numeric", judge=fake, store=MemoryStore())
    result = judge.run(input="a", output="b")
    assert result.records[0].status == "failed" and fake.calls == 1


def test_every_exception_is_in_the_one_tree_exported_and_constructed_somewhere():
    """judgehooks/exceptions.py holds every exception, drawn in its docstring; each is exported from
    the package face, and each one without subclasses is raised (or returned as an error value)
    somewhere in the package: a name nothing raises would be a promise the code does not keep."""
    import ast
    import inspect
    from pathlib import Path

    from judgehooks import exceptions

    classes = [c for _, c in inspect.getmembers(exceptions, inspect.isclass) if c.__module__ == exceptions.__name__]
    constructed = {node.func.id for path in Path(judgehooks.__file__).parent.rglob("*.py")
                   if path.name != "exceptions.py"
                   for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    for cls in classes:
        assert cls.__name__ in judgehooks.__all__, f"{cls.__name__} is not exported"
        assert cls.__name__ in (exceptions.__doc__ or ""), f"{cls.__name__} is missing from the tree"
        if not cls.__subclasses__():
            assert cls.__name__ in constructed, f"{cls.__name__} is never raised"
