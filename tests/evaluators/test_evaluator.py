"""The evaluator base: a small class or a decorated function gets hooks, records, stores,
callbacks, background grading and resume for free; bad results are error records, never failures."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from _outbox import abandon
from conftest import wait_for

import judgehooks
from judgehooks import EvalContext, Evaluator, Outcome, Regex, SQLiteStore, evaluator
from judgehooks._base.context import context_to_dict
from judgehooks._grading.outbox import Job, Outbox


class MaxWords(Evaluator):
    """A user's evaluator: settings validated first, then the shared hook settings."""

    needs_tools = False

    def __init__(self, limit: int, **hook):
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        self.limit = limit
        self.threads: list[str] = []
        super().__init__(**hook)

    def evaluate(self, ctx: EvalContext):
        self.threads.append(threading.current_thread().name)
        words = len(ctx.output.split())
        return {"passed": words <= self.limit, "reason": f"{words} words", "details": {"words": words}}


def only(store, run_id, evaluator_name):
    (record,) = [r for r in store.records if r.run_id == run_id and r.evaluator == evaluator_name]
    return record


def test_a_small_subclass_is_a_full_post_hook(make_agent, store):
    failed: list = []
    check = MaxWords(3, name="short", store=store, on_fail=failed.append)
    agent = make_agent(check, id="writer")
    ok = agent.run("hi")
    long = agent.run("this answer is far too long")
    assert only(store, ok.run_id, "short").details == {"words": 2}
    r = only(store, long.run_id, "short")
    assert (r.status, r.reason, r.mode, r.agent_id) == ("failed", "7 words", "binary", agent.id)
    wait_for(lambda: failed == [r])


@pytest.mark.anyio
async def test_sync_evaluate_runs_on_a_worker_thread_not_the_loop(make_agent, store):
    loop_threads: list[str] = []

    @evaluator(name="on-loop", store=store)
    async def on_loop(ctx):
        loop_threads.append(threading.current_thread().name)
        return True

    check = MaxWords(10, name="words", store=store)
    await make_agent(check, on_loop).arun("hello")
    assert loop_threads == ["judgehooks-loop"] and check.threads and check.threads[0] != "judgehooks-loop"


def test_decorated_functions_sync_and_async_with_scores(make_agent, store):
    @evaluator
    def mentions_echo(ctx):
        return "ECHO" in ctx.output

    @evaluator(name="length-score", threshold=0.5, store=store)
    async def length_score(ctx):
        return min(1.0, len(ctx.output) / 100)

    out = make_agent(length_score).run("short")
    r = only(store, out.run_id, "length-score")
    assert (r.status, r.mode, r.threshold, r.score) == ("failed", "numeric", 0.5, pytest.approx(0.11))
    assert (mentions_echo.evaluator, mentions_echo.mode, type(mentions_echo).__name__) == (
        "mentions_echo", "binary", "FunctionEvaluator")


@pytest.mark.parametrize("returned, error_type, message", [
    ("yes", "BadOutcome", "evaluator 'bad' returned str"),
    (0.7, "BadOutcome", "returned a score (0.7) but has no threshold"),
    ({"passed": True, "why": "x"}, "BadOutcome", "unknown keys ['why']"),
    (float("nan"), "BadOutcome", "must be a number (not NaN)"),
    (ZeroDivisionError("boom"), "ZeroDivisionError", "boom"),
])
def test_bad_results_and_exceptions_are_error_records_never_failures(make_agent, store, returned, error_type,
                                                                       message):
    errors: list = []

    @evaluator(name="bad", store=store, on_error=errors.append)
    def bad(ctx):
        if isinstance(returned, Exception):
            raise returned
        return returned

    out = make_agent(bad).run("q")
    r = only(store, out.run_id, "bad")
    assert (r.status, r.passed, r.error_type) == ("error", None, error_type) and message in r.error_message
    wait_for(lambda: errors == [r])


@pytest.mark.parametrize("make, error, message", [
    (lambda: evaluator(lambda a, b: True), TypeError, "must take exactly one argument, the run's EvalContext"),
    (lambda: evaluator(name="")(lambda ctx: True), ValueError, "name must be a non-empty string"),
    (lambda: Regex("x", threshold="high"), TypeError, "threshold must be a number or None"),
    (lambda: Regex("x", overload="spill"), ValueError, "overload must be one of 'block', 'drop_newest'"),
    (lambda: Regex("(unclosed"), ValueError, r"pattern '\(unclosed' is not a valid regular expression"),
    (lambda: Regex("x", flags="q"), ValueError, "flags must be letters from 'imsx'"),
    (lambda: MaxWords(0), ValueError, "limit must be a positive integer"),
])
def test_construction_errors_name_the_parameter(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_outcome_with_judge_usage_lands_in_the_record(make_agent, store):
    @evaluator(name="custom-judge", store=store)
    async def custom(ctx):
        return Outcome(passed=True, score=0.9, reason="fine", attempts=1, judge_model="my/model", prompt_tokens=12,
                       completion_tokens=3, cost_usd=0.0001)

    r = only(store, make_agent(custom).run("q").run_id, "custom-judge")
    assert (r.judge_model, r.prompt_tokens, r.completion_tokens, r.cost_usd, r.attempts) == (
        "my/model", 12, 3, 0.0001, 1)


# ---- stores, background, resume -----------------------------------------------------------------

def test_background_check_details_persist_in_sqlite(make_agent, tmp_path):
    db = SQLiteStore(str(tmp_path / "checks.db"))
    check = Regex(r"ECHO: (\w+)", name="bg-regex", store=db, run_in_background=True,
                  outbox=str(tmp_path / "checks.outbox.db"))
    runs = [make_agent(check).run(f"word{i}") for i in range(5)]
    assert judgehooks.drain(30)
    records = {r.run_id: r for r in db.query_sync(evaluator="bg-regex")}
    assert set(records) == {r.run_id for r in runs}
    assert all(r.details == {"matched": True, "match": r.output[:200].split(" ")[0] + " " + r.input}
               for r in records.values())
    assert check.stats()["done"] == 5


def test_an_older_sqlite_file_gains_the_details_column(tmp_path):
    import anyio

    from judgehooks._base.record import FIELDS, EvalRecord

    path = str(tmp_path / "old.db")
    old_fields = [f for f in FIELDS if f != "details"]
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE eval_records ({', '.join(old_fields)})")
    conn.execute("INSERT INTO eval_records (id, created_at, status, evaluator, mode, input, output, attempts, "
                 "sample_rate, metadata) VALUES ('old', '2026-01-01T00:00:00.000000+00:00', 'passed', 'e', 'binary', "
                 "'', '', 1, 1.0, '{}')")
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    new = EvalRecord(id="new", status="passed", evaluator="e", mode="binary", details={"checks": [1, 2]})
    anyio.run(store.write, [new])
    got = {r.id: r.details for r in store.query_sync()}
    assert got == {"old": {}, "new": {"checks": [1, 2]}}


def test_builtin_checks_rebuild_from_their_spec_and_user_code_needs_import():
    from judgehooks._evaluators.spec import rebuild

    original = Regex("ab+", flags="i", must_match=False, name="re")
    spec = json.loads(json.dumps(original.spec()))
    copy = rebuild(spec, store=judgehooks.MemoryStore(), outbox=False)
    assert (type(copy), copy.regex.pattern, copy.regex.flags & 2, copy.must_match, copy.evaluator) == (
        Regex, "ab+", 2, False, "re")
    assert evaluator(lambda ctx: True).spec() is None
    with pytest.raises(ValueError, match="built from user code"):
        rebuild(None)


RESUME_MODULE = '''
from judgehooks import SQLiteStore, evaluator
import os

@evaluator(name="user-check", store=SQLiteStore(os.environ["RESUME_DB"]), run_in_background=True)
def user_check(ctx):
    return "keep" in ctx.output
'''


@pytest.mark.slow
def test_judgehooks_resume_rebuilds_checks_and_needs_import_for_user_code(tmp_path):
    db = str(tmp_path / "resume.db")
    outbox = Outbox(str(tmp_path / "resume.outbox.db"))
    ctx = context_to_dict(EvalContext(input="q", output="keep this", run_id="run-1"))
    spec = json.dumps(judgehooks.Contains("keep", name="has-keep", store=judgehooks.MemoryStore()).spec())
    outbox.put(Job(id="j1", evaluator="has-keep", context=ctx, spec=spec, created_at=time.time()))
    outbox.put(Job(id="j2", evaluator="user-check", context=ctx, spec=None, created_at=time.time()))
    outbox.close()
    abandon(outbox.path)  # as if the process that wrote them had died
    (tmp_path / "resume_module.py").write_text(RESUME_MODULE)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "RESUME_DB": db,
           "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [sys.executable, "-m", "judgehooks._cli", "resume", "--store", db, "--timeout", "60"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "evaluator 'user-check' has pending jobs but it was built from user code" in first.stderr
    assert "pass --import MODULE" in first.stderr
    assert [(r.evaluator, r.status) for r in SQLiteStore(db).query_sync()] == [("has-keep", "passed")]
    second = subprocess.run([*command, "--import", "resume_module"], capture_output=True, text=True, timeout=120,
                            env=env)
    assert second.returncode == 0, second.stderr[-2000:]
    assert sorted((r.evaluator, r.status) for r in SQLiteStore(db).query_sync()) == [
        ("has-keep", "passed"), ("user-check", "passed")]


def test_sqlite_keeps_integer_and_fractional_thresholds(tmp_path):
    import anyio

    from judgehooks import EvalRecord

    store = SQLiteStore(str(tmp_path / "thresholds.db"))
    anyio.run(store.write, [EvalRecord(id="judge", status="passed", evaluator="j", mode="numeric", threshold=7),
                            EvalRecord(id="check", status="passed", evaluator="c", mode="numeric", threshold=0.5)])
    got = {r.id: r.threshold for r in store.query_sync()}
    assert got == {"judge": 7, "check": 0.5} and isinstance(got["judge"], int)


def test_a_subclass_that_forgets_super_init_fails_at_construction():
    class Forgetful(Evaluator):
        def __init__(self, limit: int):
            self.limit = limit

        def evaluate(self, ctx):
            return True

    class Child(MaxWords):
        pass

    with pytest.raises(TypeError, match=r"Forgetful.__init__ must call super\(\).__init__\(\*\*hook\)"):
        Forgetful(3)
    assert Child(5, store=judgehooks.MemoryStore()).limit == 5


def test_any_evaluator_can_gate_an_answer(make_agent, store, server):
    from agno.run.base import RunStatus

    from judgehooks import NotContains

    check = NotContains("password", name="no-secrets", gate=True, fallback="[withheld]", store=store)
    agent = make_agent(check)
    blocked = agent.run("the password is hunter2")
    passed = agent.run("the weather is fine")
    assert (blocked.content, blocked.status) == ("[withheld]", RunStatus.error)
    assert passed.status == RunStatus.completed and passed.content.startswith("ECHO:")
    assert [r.status for r in store.records] == ["failed", "passed"] and server.settings.counts["judge"] == 0
    with pytest.raises(ValueError, match="gate=True and repair=N need the verdict before the run returns"):
        NotContains("x", gate=True, run_in_background=True)


def test_an_evaluate_that_turns_async_after_its_first_run_is_awaited():
    """Whether `evaluate` is a coroutine function is read from its code each time: code swapped in
    place (an editor's autoreload) is run the new way, sync on a thread, async awaited."""
    import anyio

    from judgehooks._base.outcome import run_evaluator

    class Swaps(Evaluator):
        def evaluate(self, ctx):
            return True

    async def later(self, ctx):
        return False

    ev = Swaps(name="swaps")
    ctx = EvalContext(input="q", output="a")
    assert anyio.run(run_evaluator, ev, ctx).passed is True
    Swaps.evaluate.__code__ = later.__code__
    assert anyio.run(run_evaluator, ev, ctx).passed is False
