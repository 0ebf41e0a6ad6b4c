"""What a newcomer meets first: a missing or refused API key is one line naming what to set, and is
never retried (litellm calls a missing OpenAI key an InternalServerError, a server error); numbers
that do not mislead; commands that say what went wrong; a store named by a URL string."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _runner import CliResult, run_cli

from judgehooks import AgentAsJudgeEval, EvalRecord, SQLiteStore
from judgehooks._base.result import AgentAsJudgeResult
from judgehooks._hooks.settings import HookSettings
from judgehooks._judges.base import is_auth_error, is_retryable


def test_a_missing_openai_key_is_one_line_naming_the_variable_and_one_attempt(make_judge, make_agent, store,
                                                                               monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    judge = make_judge(model="openai/gpt-4o-mini", api_base=None, api_key=None, retries=3)
    make_agent(judge).run("hello")
    [record] = store.records
    assert (record.status, record.error_type, record.attempts) == ("error", "JudgeUnavailable", 1)
    assert record.error_message == ("no API key for the judge model 'openai/gpt-4o-mini': set OPENAI_API_KEY "
                                    "(or pass api_key=...); not retried")


def test_a_refused_key_names_the_api_key_given_and_is_not_retried(make_judge, make_agent, store):
    judge = make_judge(retries=3)
    make_agent(judge).run("hello [[judge_status=401]]")
    [record] = store.records
    assert (record.status, record.error_type, record.attempts) == ("error", "JudgeUnavailable", 1)
    assert record.error_message == ("the judge model 'openai/judge' refused the API key (HTTP 401): check the "
                                    "api_key passed to the evaluator; not retried")
    assert "\n" not in record.error_message


def test_auth_errors_are_told_apart_from_server_errors():
    class InternalServerError(Exception):
        status_code = 500

    missing = InternalServerError("OpenAIException - Missing credentials. Please pass an `api_key`, or set the "
                                  "`OPENAI_API_KEY` environment variable.")
    outage = InternalServerError("upstream connect error")
    assert is_auth_error(missing) and not is_retryable(missing)
    assert not is_auth_error(outage) and is_retryable(outage)


# ---- numbers that do not mislead ---------------------------------------------------------------

def test_pass_rate_is_none_not_zero_when_nothing_was_graded(make_judge):
    result = make_judge(retries=0).run(input="q [[judge_status=500]]", output="o")
    assert (result.graded_count, result.error_count, result.pass_rate) == (0, 1, None)
    assert AgentAsJudgeResult(run_id="empty").pass_rate is None


# ---- the command line ---------------------------------------------------------------------------

def cli(*args: str, cwd: Path | None = None, **_: object) -> CliResult:
    return run_cli(*args, cwd=cwd)


def test_grade_exits_non_zero_and_prints_the_first_error_when_every_case_errored(server, tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"input": f"q{i} [[judge_status=401]]", "output": "o"}) + "\n"
                             for i in range(2)))
    done = cli("grade", str(cases), "--criteria", "c", "--model", "openai/judge", "--api-base", server.base_url,
               "--api-key", "wrong", "--store", str(tmp_path / "e.db"), "--retries", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("  EVERY CASE ENDED IN ERROR; the first: JudgeUnavailable: the judge model 'openai/judge' refused the "
            "API key (HTTP 401): check the api_key passed to the evaluator; not retried") in done.stdout.splitlines()


def test_grade_with_some_errors_still_succeeds_and_names_the_first(server, tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"input": "fine", "output": "o"}) + "\n"
                     + json.dumps({"input": "q [[judge_status=500]]", "output": "o"}) + "\n")
    done = cli("grade", str(cases), "--criteria", "c", "--model", "openai/judge", "--api-base", server.base_url,
               "--api-key", "k", "--store", str(tmp_path / "e.db"), "--retries", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  first error: InternalServerError: " in done.stdout


def _record(i: int, **fields: object) -> EvalRecord:
    base: dict[str, object] = {"id": f"r{i}", "status": "passed", "evaluator": "helpful", "mode": "binary",
                               "passed": True, "reason": "fine", "agent_id": "a1", "agent_name": "Alice",
                               "created_at": datetime.now(UTC) - timedelta(minutes=5), "latency_ms": 120.0}
    return EvalRecord(**{**base, **fields})


def test_report_shows_the_most_common_error_messages(tmp_path):
    store = SQLiteStore(tmp_path / "e.db")
    no_key = {"status": "error", "passed": None, "error_type": "JudgeUnavailable",
              "error_message": "no API key for the judge model 'openai/gpt-4o-mini': set OPENAI_API_KEY"}
    asyncio.run(store.write([_record(0), *(_record(i, **no_key) for i in range(1, 4)),
                      _record(4, status="error", passed=None, error_type="TimeoutError", error_message="")]))
    store.close()
    done = cli("report", "--store", str(tmp_path / "e.db"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("most common errors (2):")
    assert lines[at + 1:at + 3] == [
        "     3x  JudgeUnavailable: no API key for the judge model 'openai/gpt-4o-mini': set OPENAI_API_KEY",
        "     1x  TimeoutError: (no message)"]
    top = json.loads(cli("report", "--store", str(tmp_path / "e.db"), "--json").stdout)["top_errors"]
    assert top[0] == {"error_type": "JudgeUnavailable", "count": 3, "message": no_key["error_message"]}


def test_the_report_fits_100_columns_with_long_names_and_weighted_rates(tmp_path):
    store = SQLiteStore(tmp_path / "e.db")
    long = {"agent_id": "customer-support-agent-for-the-european-market-v2", "agent_name": "Customer support (EU)",
            "evaluator": "answers-the-question-politely-and-without-made-up-facts", "mode": "numeric",
            "threshold": 7}
    records = [_record(i, score=float(3 + i), passed=3 + i >= 7, status="passed" if 3 + i >= 7 else "failed",
                       reason="x " * 300, sample_rate=0.25 if i < 2 else 1.0, run_id=f"run-{i}", **long)
               for i in range(6)]
    asyncio.run(store.write(records))
    store.close()
    done = cli("report", "--store", str(tmp_path / "e.db"))
    assert done.returncode == 0, done.stderr
    assert "wtd%" in done.stdout and "3-8" in done.stdout and "worst failures" in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 100


def test_a_wrong_subcommand_flag_prints_that_subcommands_usage():
    done = cli("report", "--sinse", "1h")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: judgehooks report [-h] [--store URL]")
    assert done.stderr.rstrip().endswith("judgehooks report: error: unrecognized arguments: --sinse 1h")


# ---- a store named by a string -------------------------------------------------------------------

def test_a_store_given_as_a_url_string_is_opened_with_store_from_url(tmp_path, make_agent, server):
    from judgehooks.stores import PostgresStore

    judge = AgentAsJudgeEval(criteria="c", model="openai/judge", api_base=server.base_url, api_key="k",
                             store=f"sqlite:///{tmp_path}/evals.db")
    make_agent(judge).run("hello")
    assert isinstance(judge.store, SQLiteStore) and len(judge.store.query_sync(limit=None)) == 1
    assert isinstance(HookSettings(store="postgres://judge@127.0.0.1:9/evals").store, PostgresStore)


def test_a_store_string_that_names_no_store_points_to_store_from_url():
    with pytest.raises(ValueError, match=r"^store='redis://127\.0\.0\.1/0': unsupported store URL scheme 'redis'.*"
                                         r"read by judgehooks\.stores\.store_from_url\)$"):
        AgentAsJudgeEval(criteria="c", store="redis://127.0.0.1/0")
