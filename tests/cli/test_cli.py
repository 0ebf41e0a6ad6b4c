"""The `judgehooks` command, run as a real process against real SQLite stores filled by real graded runs."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _runner import CliResult, run_cli
from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from agno.team import Team

from judgehooks import AgentAsJudgeEval, EvalRecord, SQLiteStore
from judgehooks._cli.options import parse_time
from judgehooks._cli.stats import Report
from judgehooks.stores import MemoryStore, iter_records, store_from_url

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def cli(*args: str, cwd: Path | None = None, **_: object) -> CliResult:
    return run_cli(*args, cwd=cwd)


def judge_settings(server, store, **extra):
    # A long timeout: the first judge call in a process also imports litellm, seconds on a busy machine.
    return {"model": "openai/judge", "api_base": server.base_url, "api_key": "k", "store": store, "retries": 0,
            "timeout": 60, **extra}


def llm(server) -> OpenAILike:
    return OpenAILike(id="agent", base_url=server.base_url, api_key="k")


@pytest.fixture(scope="module")
def graded(server, tmp_path_factory):
    """A SQLite store holding real verdicts: agent Alice graded numerically, team Tigers in binary."""
    db = tmp_path_factory.mktemp("cli") / "evals.db"
    store = SQLiteStore(db)
    helpful = AgentAsJudgeEval(criteria="helpful", scoring_strategy="numeric", threshold=7, name="helpful",
                               **judge_settings(server, store))
    polite = AgentAsJudgeEval(criteria="polite", name="polite", **judge_settings(server, store))
    alice = Agent(model=llm(server), id="agent-a", name="Alice", post_hooks=[helpful], telemetry=False)
    tigers = Team(members=[Agent(model=llm(server), name="member", telemetry=False)], model=llm(server),
                  id="team-t", name="Tigers", post_hooks=[polite], telemetry=False)
    runs = {prompt: alice.run(prompt).run_id
            for prompt in ("q1 [[score=9]]", "q2 [[score=3]]", "q3 [[score=8]]", "q4 [[judge_status=500]]")}
    runs.update({prompt: tigers.run(prompt).run_id for prompt in ("t1", "t2 [[fail]]")})
    assert len(store.query_sync(limit=None)) == 6
    store.close()
    return db, runs


# ---- report -----------------------------------------------------------------------------------

def test_a_nan_or_infinite_number_in_one_row_leaves_the_report_valid_json_and_the_other_scores_shown(tmp_path):
    base = dict(id="a", status="passed", evaluator="e", mode="numeric", threshold=7, score=8.0, passed=True,
                agent_id="x", created_at="2026-01-01T00:00:00+00:00", latency_ms=5.0, cost_usd=0.5,
                judge_model="m")
    odd = {**base, "id": "b", "score": float("nan"), "latency_ms": float("inf"), "cost_usd": float("inf")}
    path = tmp_path / "evals.jsonl"  # as another program appends to it: Python's json writes NaN and Infinity
    path.write_text("".join(json.dumps(row) + "\n" for row in (base, odd)))
    done = cli("report", "--store", str(path), "--since", "all", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout, parse_constant=lambda word: pytest.fail(f"not JSON: {word}"))
    assert report["total"]["count"] == 2 and report["total"]["score"]["mean"] == 8.0
    assert report["total"]["latency_ms_mean"] == 5.0
    [day] = report["judge_cost"]
    assert (day["cost_usd"], day["unpriced"]) == (0.5, 1)


def test_report_json_counts_real_verdicts_per_agent_team_and_evaluator(graded):
    db, runs = graded
    done = cli("report", "--store", f"sqlite:///{db}", "--since", "all", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    groups = {(g["kind"], g["id"], g["evaluator"]): g for g in report["groups"]}
    assert set(groups) == {("agent", "agent-a", "helpful"), ("team", "team-t", "polite")}
    alice = groups["agent", "agent-a", "helpful"]
    assert alice["name"] == "Alice"
    assert (alice["count"], alice["passed"], alice["failed"], alice["error"], alice["skipped"]) == (4, 2, 1, 1, 0)
    assert alice["pass_rate"] == pytest.approx(2 / 3)  # the judge error is not a failure
    assert alice["error_rate"] == 0.25 and alice["skip_rate"] == 0.0
    assert alice["score"] == {"mean": pytest.approx(20 / 3), "min": 3, "p50": 8, "max": 9}
    assert alice["latency_ms_mean"] > 0
    tigers = groups["team", "team-t", "polite"]
    assert (tigers["name"], tigers["count"], tigers["passed"], tigers["failed"], tigers["pass_rate"]) == (
        "Tigers", 2, 1, 1, 0.5)
    assert tigers["score"]["mean"] is None  # binary verdicts have no numeric score statistics
    assert report["total"]["count"] == 6 and report["total"]["pass_rate"] == 0.6
    worst = report["worst_failures"]
    assert [w["run_id"] for w in worst] == [runs["q2 [[score=3]]"], runs["t2 [[fail]]"]]  # lowest score first
    assert worst[0]["score"] == 3 and worst[0]["reason"] == "stub judge gave 3" and worst[0]["name"] == "Alice"
    assert worst[1]["kind"] == "team" and worst[1]["reason"] == "stub judge says fail"


def test_report_filters_by_agent_and_time_window(graded):
    db, _ = graded
    only_alice = json.loads(cli("report", "--store", str(db), "--agent-id", "agent-a", "--since", "1h",
                                "--json").stdout)
    assert [(g["id"], g["count"]) for g in only_alice["groups"]] == [("agent-a", 4)]
    before = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    empty = json.loads(cli("report", "--store", str(db), "--since", "all", "--until", before, "--json").stdout)
    assert empty["groups"] == [] and empty["total"]["count"] == 0 and empty["total"]["pass_rate"] is None


def test_report_text_is_an_aligned_table_with_the_worst_failures(graded):
    db, runs = graded
    done = cli("report", "--store", str(db), "--since", "7d", "--worst", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("evaluator"))
    alice = lines[lines.index("agent Alice (agent-a)") + 1]  # the target's heading, then a row per evaluator
    assert alice.startswith("  helpful ")
    assert header.index("pass%") + len("pass%") == alice.index("66.7%") + len("66.7%")  # right-aligned
    assert "worst failures (1):" in done.stdout and runs["q2 [[score=3]]"] in done.stdout
    assert "stub judge gave 3" in done.stdout and runs["t2 [[fail]]"] not in done.stdout


def test_report_on_a_missing_store_file_is_one_line_and_creates_nothing(tmp_path):
    done = cli("report", "--store", f"sqlite:///{tmp_path}/typo.db")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"judgehooks: cannot open store sqlite:///{tmp_path}/typo.db: no such file '{tmp_path}/typo.db'"]
    assert not (tmp_path / "typo.db").exists()


def test_an_unreachable_store_is_a_one_line_error_without_the_password(tmp_path):
    done = cli("report", "--store", "postgresql://judge:s3cret@127.0.0.1:9/evals")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("judgehooks: cannot open store postgresql://judge:***@127.0.0.1:9/evals: ")
    assert "s3cret" not in line
    try:
        import judgehooks.stores._postgres  # noqa: F401
    except ImportError:
        assert line.endswith('pip install "judgehooks[postgres]"')


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path):
    (tmp_path / "notes.db").write_text("not sqlite")
    done = cli("tail", "--store", str(tmp_path / "notes.db"), "--no-follow")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"judgehooks: cannot open store {tmp_path}/notes.db: DatabaseError: file is not a database")


# ---- tail -------------------------------------------------------------------------------------

def test_tail_without_follow_prints_the_last_records_oldest_first(graded):
    db, runs = graded
    done = cli("tail", "--store", str(db), "-n", "2", "--no-follow", "--json")
    assert done.returncode == 0, done.stderr
    records = [EvalRecord.model_validate_json(line) for line in done.stdout.splitlines()]
    assert [r.run_id for r in records] == [runs["t1"], runs["t2 [[fail]]"]]
    text = cli("tail", "--store", str(db), "-n", "1", "--no-follow", "--evaluator", "helpful").stdout
    assert text.split()[1:4] == ["error", "helpful", "agent=Alice"] and "InternalServerError" in text


@pytest.mark.slow
def test_tail_follows_a_record_written_after_it_started_and_stops_on_ctrl_c(graded, server, tmp_path):
    db = shutil.copy(graded[0], tmp_path / "tail.db")  # the shared store stays as the other tests expect
    runs = graded[1]
    # Ctrl-C as a terminal sends it. A suite started from a script that ignores SIGINT (`trap "" INT`,
    # `nohup`, a non-interactive `cmd &`) hands that SIG_IGN down to every child, and Python keeps an
    # inherited SIG_IGN: so the child restores Python's own handler first, as in an interactive shell.
    interactive = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                   "sys.argv[0] = 'judgehooks'; runpy.run_module('judgehooks._cli', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", interactive, "tail", "--store", str(db), "-n", "1",
                             "--json", "--interval", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        first = EvalRecord.model_validate_json(lines.get(timeout=60))
        assert first.run_id == runs["t2 [[fail]]"]  # the last record, printed before following
        store = SQLiteStore(db)
        judge = AgentAsJudgeEval(criteria="late", name="late", **judge_settings(server, store))
        run_id = Agent(model=llm(server), id="agent-late", post_hooks=[judge], telemetry=False).run("hi").run_id
        new = EvalRecord.model_validate_json(lines.get(timeout=60))
        assert (new.run_id, new.evaluator, new.status) == (run_id, "late", "passed")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in proc.stderr.read()
        assert lines.empty()  # nothing printed twice
        store.close()
    finally:
        proc.kill()
        proc.wait()


# ---- grade ------------------------------------------------------------------------------------

def _cases(path: Path, *lines: object) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_grade_validates_every_line_first_and_grades_nothing_when_one_is_bad(server, tmp_path):
    cases = _cases(tmp_path / "cases.jsonl", {"input": "ok", "output": "fine"}, '{"input": "a", "output": }',
                   {"input": "no output"}, {"input": None, "output": "x"}, "",
                   {"input": "a", "output": "b", "expect": 1})
    done = cli("grade", str(cases), "--criteria", "c", "--model", "openai/judge", "--api-base", server.base_url,
               "--api-key", "k", "--store", str(tmp_path / "evals.db"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"judgehooks: grade: {cases}:2: bad JSON: Expecting value (column 26)",
        f"{cases}:3: missing 'output' (each line needs input and output)",
        f"{cases}:4: 'input' must be a string (or a JSON object/array), got null",
        f"{cases}:6: unknown key(s) 'expect' (allowed: input, output, expected_output, expected, metadata, id)",
        f"4 bad line(s) in {cases}: nothing graded"]
    assert server.settings.counts["judge"] == 0 and not (tmp_path / "evals.db").exists()


@pytest.mark.slow
def test_grade_end_to_end_stores_one_record_per_case_with_its_line(server, tmp_path):
    cases = _cases(tmp_path / "cases.jsonl",
                   {"input": "2+2? [[score=9]]", "output": "4", "expected_output": "4", "id": "sum"},
                   {"input": "capital of France? [[score=2]]", "output": "Lyon", "metadata": {"topic": "geo"}},
                   "",
                   {"input": "q [[judge_status=500]]", "output": "o"},
                   {"input": {"messages": ["hi"]}, "output": ["hello", "there"], "expected": None},
                   {"input": "q5 [[score=7]]", "output": "o5"})
    db = tmp_path / "evals.db"
    done = cli("grade", str(cases), "--criteria", "correct", "--model", "openai/judge", "--api-base", server.base_url,
               "--api-key", "k", "--scoring-strategy", "numeric", "--threshold", "7", "--name", "correct",
               "--retries", "0", "--chunk-size", "2", "--store", f"sqlite:///{db}", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert {k: summary[k] for k in ("cases", "passed", "failed", "error", "skipped", "stored", "not_stored",
                                    "not_graded", "evaluator")} == {
        "cases": 5, "passed": 3, "failed": 1, "error": 1, "skipped": 0, "stored": 5, "not_stored": 0,
        "not_graded": 0, "evaluator": "correct"}
    assert summary["pass_rate"] == 0.75
    records = SQLiteStore(db).query_sync(limit=None)
    by_line = {r.metadata["case"]["line"]: r for r in records}
    assert sorted(by_line) == [1, 2, 4, 5, 6]
    assert {r.metadata["case"]["batch_id"] for r in records} == {summary["batch_id"]}
    assert len({r.run_id for r in records}) == 5  # a run id per case,
    assert len({r.run_id.rpartition(":")[0] for r in records}) == 3  # from a batch per chunk of two
    assert (by_line[1].status, by_line[1].score, by_line[1].metadata["case"]["id"]) == ("passed", 9, "sum")
    assert (by_line[2].status, by_line[2].metadata["topic"]) == ("failed", "geo")
    assert by_line[4].status == "error" and by_line[4].error_type
    assert json.loads(by_line[5].input) == {"messages": ["hi"]}


@pytest.mark.slow
def test_grade_prints_a_summary_a_person_can_read(server, tmp_path):
    cases = _cases(tmp_path / "c.jsonl", {"input": "a", "output": "b"}, {"input": "c [[fail]]", "output": "d"})
    done = cli("grade", str(cases), "--criteria", "c", "--model", "openai/judge", "--api-base", server.base_url,
               "--api-key", "k", "--store", str(tmp_path / "e.db"), "--progress")
    assert done.returncode == 0, done.stderr
    assert "2 case(s): 1 passed, 1 failed, 0 error, 0 skipped" in done.stdout
    assert "pass rate 50.0% of 2 graded" in done.stdout and "stored 2 of 2" in done.stdout
    assert "2/2" in done.stderr  # the progress bar, asked for although stderr is not a terminal


@pytest.mark.slow
def test_grade_with_an_evaluator_defined_in_code(server, tmp_path):
    db = tmp_path / "code.db"
    (tmp_path / "my_evals.py").write_text(textwrap.dedent(f"""
        from judgehooks import AgentAsJudgeEval, SQLiteStore
        concise = AgentAsJudgeEval(criteria="concise", name="concise", model="openai/judge",
                                   api_base={server.base_url!r}, api_key="k", store=SQLiteStore({str(db)!r}))
    """))
    cases = _cases(tmp_path / "cases.jsonl", {"input": "a", "output": "b"}, {"input": "c", "output": "d"})
    done = cli("grade", "cases.jsonl", "--import-evaluator", "my_evals:concise", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [r.evaluator for r in SQLiteStore(db).query_sync(limit=None)] == ["concise", "concise"]
    clash = cli("grade", str(cases), "--import-evaluator", "my_evals:concise", "--model", "openai/x", cwd=tmp_path)
    assert clash.returncode == 2 and "--model cannot be combined with --import-evaluator" in clash.stderr


FLAKY_STORE = """
from judgehooks import AgentAsJudgeEval, SQLiteStore

class DiskFull(SQLiteStore):
    async def write(self, records):
        raise OSError("disk full")

judge = AgentAsJudgeEval(criteria="c", name="c", model="openai/judge", api_base={base!r}, api_key="k",
                         store=DiskFull({db!r}))
"""


@pytest.mark.slow
def test_grade_keeps_what_the_store_refused_and_stops_grading(server, tmp_path):
    db = tmp_path / "full.db"
    (tmp_path / "full_store.py").write_text(FLAKY_STORE.format(base=server.base_url, db=str(db)))
    _cases(tmp_path / "cases.jsonl", *({"input": f"q{i}", "output": "o"} for i in range(5)))
    done = cli("grade", "cases.jsonl", "--import-evaluator", "full_store:judge", "--chunk-size", "2", "--json",
               cwd=tmp_path)
    assert done.returncode == 1
    summary = json.loads(done.stdout)
    assert (summary["stored"], summary["not_stored"], summary["not_graded"], summary["first_line_not_graded"]) == (
        0, 2, 3, 3)
    kept_lines = (tmp_path / summary["unstored_file"]).read_text().splitlines()
    kept = [EvalRecord.model_validate_json(line) for line in kept_lines]
    assert [r.metadata["case"]["line"] for r in kept] == [1, 2] and all(r.status == "passed" for r in kept)
    assert server.settings.counts["judge"] == 2  # no judge calls paid for after the store failed


# ---- the pieces under the commands ------------------------------------------------------------

def test_store_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert store_from_url("sqlite:///rel.db").path == "rel.db"
    assert store_from_url(f"sqlite:///{tmp_path}/abs.db").path == f"{tmp_path}/abs.db"
    assert store_from_url("sqlite://rel2.db").path == "rel2.db"
    assert store_from_url("plain.db").path == "plain.db"
    assert isinstance(store_from_url("memory://"), MemoryStore)
    with pytest.raises(ValueError, match="unsupported store URL scheme 'redis'"):
        store_from_url("redis://localhost")
    optional = {"postgresql://u@127.0.0.1/db": ("PostgresStore", 'pip install "judgehooks[postgres]"'),
                "postgres://u@127.0.0.1/db": ("PostgresStore", 'pip install "judgehooks[postgres]"'),
                "postgresql+psycopg://u@127.0.0.1/db": ("PostgresStore", 'pip install "judgehooks[postgres]"'),
                "jsonl:///evals.jsonl": ("JsonlStore", "JsonlStore is not available"),
                "evals.jsonl": ("JsonlStore", "JsonlStore is not available")}
    for url, (class_name, hint) in optional.items():
        try:
            store = store_from_url(url)
        except ImportError as exc:  # until the stores branch lands PostgresStore and JsonlStore
            assert hint in str(exc), url
        else:
            assert type(store).__name__ == class_name, url


async def _all(store, page_size, **filters):
    return [r async for r in iter_records(store, page_size=page_size, **filters)]


def _record(i: int, at: datetime, **fields) -> EvalRecord:
    return EvalRecord(id=f"r{i:03}", created_at=at, status="passed", evaluator="e", mode="binary", passed=True,
                      **fields)


@pytest.mark.anyio
async def test_iter_records_pages_through_equal_timestamps_without_loss_or_repeats(tmp_path):
    base = datetime(2026, 1, 1, tzinfo=UTC)
    records = [_record(i, base + timedelta(seconds=i // 7)) for i in range(40)]  # runs of 7 equal timestamps
    store = SQLiteStore(tmp_path / "ties.db")
    await store.write(records)
    for page_size in (1, 3, 7, 1000):
        got = await _all(store, page_size)
        assert sorted(r.id for r in got) == [r.id for r in records], page_size
        assert [r.created_at for r in got] == sorted((r.created_at for r in got), reverse=True)
    window = await _all(store, 4, since=base + timedelta(seconds=1), until=base + timedelta(seconds=3))
    assert sorted(r.id for r in window) == [f"r{i:03}" for i in range(7, 21)]
    await store.aclose()


def test_report_stats_weight_sampled_records_and_take_an_exact_median():
    now = datetime.now(UTC)
    report = Report(worst=2)
    for i, (status, score, rate) in enumerate([("passed", 8, 1.0), ("failed", 2, 0.25), ("failed", 4, 1.0),
                                               ("passed", 10, 1.0), ("error", None, 1.0), ("skipped", None, 0.5)]):
        report.add(EvalRecord(id=str(i), created_at=now + timedelta(seconds=i), status=status, evaluator="e",
                              mode="numeric", threshold=7, score=score, passed=None if score is None else score >= 7,
                              sample_rate=rate, agent_id="a", latency_ms=None if status == "skipped" else 100.0))
    [group] = report.to_json()["groups"]
    assert group["pass_rate"] == 0.5
    assert group["weighted_pass_rate"] == pytest.approx(2 / 7)  # the 1-in-4 sampled failure counts 4 times
    assert group["score"] == {"mean": 6.0, "min": 2, "p50": 6.0, "max": 10}
    assert (group["error_rate"], group["skip_rate"], group["latency_ms_mean"]) == (1 / 6, 1 / 6, 100.0)
    assert [w["score"] for w in report.to_json()["worst_failures"]] == [2, 4]


def test_time_windows_accept_durations_and_iso_times():
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert parse_time("24h", now=now) == now - timedelta(hours=24)
    assert parse_time("7d", now=now) == now - timedelta(days=7)
    assert parse_time("2026-11-30T08:00:00Z") == datetime(2026, 11, 30, 8, tzinfo=UTC)
    assert parse_time("2026-11-30T08:00") == datetime(2026, 11, 30, 8, tzinfo=UTC)  # no offset: UTC


@pytest.mark.parametrize("value", ["99999999999999d", "1" * 400 + "s", "0001-01-01T00:00:00+01:00",
                                   "9999-12-31T23:59:59-01:00"])
def test_a_time_out_of_range_is_refused_by_the_option_s_name_without_a_traceback(tmp_path, value):
    store = SQLiteStore(tmp_path / "evals.db")
    store.query_sync()  # creates the file
    store.close()
    for command, flag in (("report", "--since"), ("report", "--until"), ("export", "--since"), ("review", "--since")):
        done = run_cli(command, "--store", tmp_path / "evals.db", flag, value)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert f"argument {flag}:" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert "before the year 1" in done.stderr or "out of range" in done.stderr, done.stderr
    with pytest.raises(ValueError, match="^since: .*(before the year 1|out of range)"):
        SQLiteStore(tmp_path / "evals.db").query_sync(since=value)


def test_the_console_script_lists_every_command():
    script = Path(sys.executable).with_name("judgehooks")
    if not script.exists():
        pytest.skip("the judgehooks console script is not installed: pip install -e .")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 0
    for command in ("report", "tail", "grade", "resume"):
        assert command in done.stdout
