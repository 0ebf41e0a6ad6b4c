"""Package surface: lazy litellm import, the pinned public namespace, logging without printing."""

from __future__ import annotations

import subprocess
import sys

from structlog.testing import capture_logs

import judgehooks


def test_import_does_not_import_litellm():
    code = "import sys, judgehooks; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_public_names_are_pinned():
    assert judgehooks.__all__ == (
        "AgentAsJudgeEval", "AgentAsJudgeResult", "AgnoDbStore", "AgnoJudge", "BadOutcome", "Borderline", "Budget",
        "Contains", "Criterion", "Ensemble", "EvalContext", "EvalRecord", "Evaluator", "ExactMatch", "FanoutStore",
        "Group", "IsJSON", "JSONSchema", "JsonlStore", "Judge", "JudgeReply", "JudgeRequest", "JudgeTemplate",
        "JudgeUnavailable", "JudgehooksError", "LabelMatch", "LiteLLMJudge", "LogNotifier", "MalformedVerdict",
        "MatchesModel", "MemberError", "MemoryStore", "MissingExpected", "MissingMetrics", "NotContains", "Ordered",
        "Outcome", "PostgresStore", "QualityAlert", "Regex", "RetryPolicy", "Rubric", "RunUsage", "SQLiteStore",
        "ScorerEval", "SlackNotifier", "Store", "StoreError", "ToolCall", "ToolUse", "Verdict", "WebhookNotifier",
        "WindowedAlert", "__version__", "add_judge", "adrain", "drain", "evaluator", "get_judge", "lifespan",
        "list_judges", "parse_verdict", "stats",
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
