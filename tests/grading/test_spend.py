"""Spend caps: `max_cost_usd` / `max_calls` per window. Over a cap a run is not judged: its record is
`skipped` with reason "budget", `on_drop` hears of it, `stats()` counts it, one warning per window.
Real agno agents, real litellm over HTTP to the stub server (with a model litellm has a price for,
and one it has none for), real redis-server and two `judgehooks worker` processes."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from _runner import run_cli
from structlog.testing import capture_logs

import judgehooks
from judgehooks import Contains, MemoryStore

#: a model litellm's local price list knows: the stub answers it, litellm prices its tokens
PRICED = "openai/gpt-4o-mini"


def statuses(store: MemoryStore) -> list[str]:
    return sorted(r.status for r in store.records)


# Counts are per evaluator name (or budget name) in a process: each test names its evaluators.

def test_max_calls_skips_the_runs_beyond_it_with_reason_budget(make_judge, make_agent, store):
    dropped = []
    judge = make_judge(name="calls-capped", max_calls=2, per="hour", on_drop=dropped.append)
    agent = make_agent(judge)
    with capture_logs() as logs:
        for i in range(4):
            agent.run(f"q{i}")
    assert statuses(store) == ["passed", "passed", "skipped", "skipped"]
    skipped = [r for r in store.records if r.status == "skipped"]
    assert [r.reason for r in skipped] == ["budget", "budget"] and dropped == skipped
    budget = skipped[0].details["budget"]
    assert (budget["max_calls"], budget["calls"], budget["per"]) == (2, 2, "hour")
    assert budget["judge_model"] == "openai/judge"
    assert budget["window_start"].endswith(":00:00+00:00") and budget["name"] == judge.evaluator_name
    assert judge.stats()["over_budget"] == 2
    warnings = [e for e in logs if e["event"] == "spend_cap_reached"]
    assert len(warnings) == 1 and warnings[0]["cap"] == "max_calls" and warnings[0]["limit"] == 2


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_max_calls_counts_every_judge_call_retries_included(make_judge, make_agent, store, server, tmp_path,
                                                            background):
    """Audit 3, M4: a judge that replies unreadable text is retried; each retry is a paid call. Under
    max_calls=2 the server gets at most 2 requests in the window, and every run still ends as a record."""
    where = {"run_in_background": True, "outbox": str(tmp_path / "o.db")} if background else {}
    # timeout=60: on a loaded machine a fresh loop's first call (the SDK client's imports) can pass the
    # default 10 s, and a timed-out call is a paid call too, so it would take the retry this test counts
    judge = make_judge(name=f"retries-capped-{background}", max_calls=2, per="hour", retries=3, timeout=60, **where)
    agent = make_agent(judge)
    for i in range(3):
        agent.run(f"q{i} [[judge_malformed]]")
    assert not background or judgehooks.drain(30)
    assert server.settings.counts["judge"] == 2, [(r.status, r.error_type, r.error_message) for r in store.records]
    assert len(store.records) == 3  # none dropped silently
    errors = [r for r in store.records if r.status == "error"]
    # inline, the first run takes both calls (its retry included); in the background two runs may
    # be admitted at once, each taking one call: either way 2 calls, and each error says what stopped it
    assert sum(r.attempts for r in errors) == 2 and {r.error_type for r in errors} == {"MalformedVerdict"}
    assert all("spend cap reached: max_calls=2 per hour" in r.details["spend_cap"] for r in errors)
    assert len(errors) == 1 or background
    assert {r.reason for r in store.records if r.status == "skipped"} == {"budget"}


def test_a_composites_member_past_the_cap_is_not_asked(make_agent, store, server):
    """Each judge call is admitted: a composite's second judge past max_calls is an error member, not a call."""
    from judgehooks import AgentAsJudgeEval, Group

    def member(name: str) -> AgentAsJudgeEval:
        return AgentAsJudgeEval(name=name, criteria="The answer echoes the question.", model="openai/judge",
                                api_base=server.base_url, api_key="test-key", retry_backoff=0.01, timeout=10)

    group = Group([member("first"), member("second")], name="capped-group", store=store, max_calls=1, per="hour")
    make_agent(group).run("q")
    assert server.settings.counts["judge"] == 1
    [record] = store.records
    assert record.status == "error" and "spend cap reached: max_calls=1" in json.dumps(record.details)


def test_max_cost_usd_stops_judging_once_the_window_has_spent_it(make_judge, make_agent, store):
    judge = make_judge(name="cost-capped", model=PRICED, max_cost_usd=1e-9, per="day")
    agent = make_agent(judge)
    for i in range(3):
        agent.run(f"q{i}")
    [graded] = [r for r in store.records if r.status == "passed"]
    assert graded.cost_usd is not None and graded.cost_usd > 0  # litellm priced the judge call
    skipped = [r for r in store.records if r.status == "skipped"]
    assert len(skipped) == 2 and all(r.reason == "budget" for r in skipped)
    assert skipped[0].details["budget"]["cost_usd"] == pytest.approx(graded.cost_usd, abs=1e-6)


def test_with_no_price_known_the_cost_cap_counts_nothing_and_says_so_once(make_judge, make_agent, store):
    """litellm knows no price for `openai/judge`: its calls count as 0 USD, so max_cost_usd never
    trips; one warning per window says so; max_calls still holds."""
    judge = make_judge(name="unpriced", max_cost_usd=1e-9, max_calls=3, per="minute")
    agent = make_agent(judge)
    with capture_logs() as logs:
        for i in range(4):
            agent.run(f"q{i}")
    assert statuses(store) == ["passed", "passed", "passed", "skipped"]
    assert all(r.cost_usd is None for r in store.records)
    unknown = [e for e in logs if e["event"] == "spend_cap_cost_unknown"]
    assert len(unknown) == 1 and "counts its calls as 0 USD" in unknown[0]["note"]
    [reached] = [e for e in logs if e["event"] == "spend_cap_reached"]
    assert reached["cap"] == "max_calls"


def test_a_named_budget_is_shared_across_evaluators_per_judge_model(make_judge, make_agent, store):
    first = make_judge(name="first", budget="team-a", max_calls=3)
    second = make_judge(name="second", budget="team-a", max_calls=3)
    other_model = make_judge(name="priced", budget="team-a", max_calls=3, model=PRICED)
    agent = make_agent(first, second, other_model)
    for i in range(2):
        agent.run(f"q{i}")
    by_name: dict[str, list[str]] = {}
    for r in store.records:
        by_name.setdefault(r.evaluator, []).append(r.status)
    # first and second share 3 calls of openai/judge; the priced model's count is its own
    assert sorted(by_name["first"] + by_name["second"]) == ["passed", "passed", "passed", "skipped"]
    assert by_name["priced"] == ["passed", "passed"]


def test_checks_take_max_calls_too(make_agent, store):
    check = Contains("ECHO", name="check-capped", store=store, max_calls=1, per="day")
    agent = make_agent(check)
    agent.run("a")
    agent.run("b")
    assert statuses(store) == ["passed", "skipped"] and check.stats()["over_budget"] == 1


def test_background_grading_skips_over_budget_runs_and_counts_them(make_judge, make_agent, store, tmp_path):
    dropped = []
    judge = make_judge(name="background-capped", max_calls=1, run_in_background=True, outbox=str(tmp_path / "o.db"),
                       on_drop=dropped.append, timeout=60)  # one call, no retry left under max_calls=1
    agent = make_agent(judge)
    for i in range(3):
        agent.run(f"q{i}")
    assert judgehooks.drain(30)
    assert statuses(store) == ["passed", "skipped", "skipped"]
    stats = judge.stats()
    assert stats["over_budget"] == 2 and stats["dropped"] == 0  # not shed under load: over budget
    assert sorted(r.id for r in dropped) == sorted(r.id for r in store.records if r.status == "skipped")


@pytest.mark.parametrize(("settings", "message"), [
    ({"max_calls": 0}, "max_calls"),
    ({"max_calls": 1.5}, "max_calls"),
    ({"max_cost_usd": 0}, "max_cost_usd"),
    ({"max_cost_usd": "5"}, "max_cost_usd"),
    ({"per": "week"}, "per must be one of 'minute', 'hour', 'day'"),
    ({"budget": " "}, "budget must be a non-empty name"),
])
def test_bad_caps_are_refused_by_name(make_judge, settings, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make_judge(**settings)


# ---- across processes: two `judgehooks worker` processes share one count in Redis --------------

APP = """
import os
from judgehooks import AgentAsJudgeEval
judge = AgentAsJudgeEval(name="capped", criteria="c", model="openai/judge", api_base=os.environ["SPEND_STUB"],
                         api_key="k", max_calls=3, per="day", run_in_background=True,
                         broker=os.environ["SPEND_BROKER"], outbox=os.environ["SPEND_OUTBOX"])
"""


def _worker(redis_url: str, db: Path, name: str, tmp_path: Path, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "judgehooks._cli", "worker", "--broker", redis_url, "--store", f"sqlite:///{db}",
         "--name", name, "--concurrency", "1", "--reclaim-after", "5", "--import", "spend_app"],
        stdout=subprocess.PIPE, stderr=open(tmp_path / f"{name}.err", "w"), text=True, env=env)
    line = proc.stdout.readline()
    assert "grading from" in line, (line, (tmp_path / f"{name}.err").read_text()[-3000:])
    return proc


def test_two_worker_processes_share_one_cap_through_redis(make_agent, redis_base, tmp_path, server, monkeypatch):
    client = redis.Redis.from_url(redis_base)
    client.flushdb()
    (tmp_path / "spend_app.py").write_text(APP)
    env = {**os.environ, "SPEND_STUB": server.base_url, "SPEND_BROKER": redis_base,
           "SPEND_OUTBOX": str(tmp_path / "producer.outbox.db"), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    for key in ("SPEND_STUB", "SPEND_BROKER", "SPEND_OUTBOX"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.syspath_prepend(str(tmp_path))
    import spend_app  # the producer: the same evaluator, publishing its jobs to Redis

    db = tmp_path / "shared.db"
    workers = [_worker(redis_base, db, f"spend-{i}", tmp_path, env) for i in range(2)]
    outputs = []
    try:
        agent = make_agent(spend_app.judge)
        for i in range(8):
            agent.run(f"q{i} [[judge_delay=200]]")
        assert judgehooks.drain(30)
        deadline = time.monotonic() + 60
        while True:
            with sqlite3.connect(db) as conn:
                rows = conn.execute("SELECT status FROM eval_records").fetchall() if _has_table(conn) else []
                reasons = conn.execute("SELECT reason FROM eval_records WHERE status = 'skipped'").fetchall() \
                    if rows else []
            if len(rows) == 8 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        for proc in workers:
            proc.terminate()
        for i, proc in enumerate(workers):
            outputs.append(proc.communicate(timeout=60)[0] + (tmp_path / f"spend-{i}.err").read_text())
        client.close()
    assert sorted(rows) == [("passed",)] * 3 + [("skipped",)] * 5 and reasons == [("budget",)] * 5
    graded = [int(re.search(r"stopped; (\d+) graded", out).group(1)) for out in outputs]
    assert sum(graded) == 8 and all(n > 0 for n in graded), outputs  # each process took some of the jobs


def _has_table(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'eval_records'").fetchone() is not None


# ---- judgehooks report: judge cost per evaluator per day ----------------------------------------

def test_report_shows_judge_cost_per_evaluator_per_day(make_judge, make_agent, tmp_path):
    db = tmp_path / "costs.db"
    priced = make_judge(name="report-priced", model=PRICED, store=str(db), max_calls=2)
    unpriced = make_judge(name="report-unpriced", store=str(db))
    agent = make_agent(priced, unpriced)
    for i in range(3):
        agent.run(f"q{i}")
    done = run_cli("report", "--store", f"sqlite:///{db}", "--since", "all", "--json")
    rows = {r["evaluator"]: r for r in json.loads(done.stdout)["judge_cost"]}
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert rows["report-priced"]["day"] == today and rows["report-priced"]["calls"] == 2
    assert rows["report-priced"]["cost_usd"] > 0 and rows["report-priced"]["over_budget"] == 1
    unpriced_row = rows["report-unpriced"]
    assert (unpriced_row["calls"], unpriced_row["cost_usd"], unpriced_row["unpriced"]) == (3, 0, 3)
    text = run_cli("report", "--store", f"sqlite:///{db}", "--since", "all").stdout
    assert "judge cost per evaluator per day (UTC):" in text
    [line] = [ln for ln in text.splitlines() if "report-priced" in ln and today in ln]
    assert line.split()[2:] == ["2", f"{rows['report-priced']['cost_usd']:.4f}", "0", "1"]


def test_with_redis_unreachable_a_call_is_admitted_uncounted_and_said_so():
    import asyncio
    import socket

    from redis.asyncio import ConnectionPool

    from judgehooks._grading.redis.spend import RedisLedger
    from judgehooks._grading.spend import SpendCap

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes

    async def attempt():
        pool = ConnectionPool.from_url(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=1)
        cap = SpendCap(evaluator="e", model="m", per="minute", max_calls=1, ledger=RedisLedger(pool))
        try:
            tickets = [await cap.admit(), await cap.admit()]
            await cap.charge(tickets[0], 1.0)
            return tickets
        finally:
            await pool.aclose()

    with capture_logs() as logs:
        tickets = asyncio.run(attempt())
    assert all(t.admitted for t in tickets)
    assert [e["event"] for e in logs].count("spend_cap_unavailable") == 2



@pytest.mark.parametrize("planted", ["many", "-1000000", "nan", "a hash"])
def test_a_redis_spend_count_that_is_not_a_count_counts_as_zero(redis_base, planted):
    """Whoever writes to Redis can put text, a negative number or a key of another type where a
    window's count goes: it counts as zero and counting goes on, so the cap holds again after it
    (it was skipped: every call admitted uncounted, for the whole window)."""
    import asyncio

    from redis.asyncio import ConnectionPool

    from judgehooks._grading.redis.spend import RedisLedger
    from judgehooks._grading.spend import SpendCap

    rds = redis.Redis.from_url(redis_base)
    rds.flushdb()

    async def admitted(cap: SpendCap, times: int) -> list[bool]:
        return [(await cap.admit()).admitted for _ in range(times)]

    async def attempt() -> tuple[list[bool], list[bool]]:
        pool = ConnectionPool.from_url(redis_base)
        ledger = RedisLedger(pool)
        calls = SpendCap(evaluator="forged-calls", model="m", per="day", max_calls=2, ledger=ledger)
        cost = SpendCap(evaluator="forged-cost", model="m", per="day", max_cost_usd=1.0, ledger=ledger)
        try:
            first = await admitted(calls, 1) + await admitted(cost, 1)
            for key in rds.scan_iter("judgehooks:spend:*"):  # this window's count and cost, forged
                rds.delete(key)
                rds.hset(key, "x", "1") if planted == "a hash" else rds.set(key, planted)
            assert len(first) == 2 and rds.dbsize() >= 2
            over_calls = await admitted(calls, 3)  # counted from zero again: two more calls, then the cap
            ticket = await cost.admit()
            await cost.charge(ticket, 5.0)
            return over_calls, [ticket.admitted, *await admitted(cost, 2)]
        finally:
            await pool.aclose()

    with capture_logs():
        over_calls, over_cost = asyncio.run(attempt())
    rds.close()
    assert over_calls == [True, True, False]
    assert over_cost == [True, False, False]


# ---- shared through a SQLite file (spend_ledger=) --------------------------------------------------

SHARED_APP = """
import json, os, sys, time
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from judgehooks import AgentAsJudgeEval, MemoryStore

base, ledger, start, name = sys.argv[1:5]
store = MemoryStore()
judge = AgentAsJudgeEval(name="shared-cap", criteria="c", model=sys.argv[5], api_base=base, api_key="k",
                         store=store, max_calls=int(sys.argv[6]), max_cost_usd=float(sys.argv[7]) or None,
                         spend_ledger=ledger)
agent = Agent(model=OpenAILike(id="agent", base_url=base, api_key="k"), post_hooks=[judge], telemetry=False)
while not os.path.exists(start):  # both processes ready: run at the same time
    time.sleep(0.01)
for i in range(4):
    agent.run(f"{name} q{i}")
print(json.dumps([[r.status, r.reason] for r in store.records]))
"""


def _shared_processes(tmp_path: Path, server, model: str, max_calls: int, max_cost_usd: float) -> list[list]:
    (tmp_path / "shared_app.py").write_text(SHARED_APP)
    start = tmp_path / "start"
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "shared_app.py"), server.base_url,
                               str(tmp_path / "spend.db"), str(start), f"p{i}", model, str(max_calls),
                               str(max_cost_usd)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}) for i in range(2)]
    start.touch()
    found = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        found += json.loads(out.strip().splitlines()[-1])
    return found


def test_two_processes_share_max_calls_through_a_sqlite_spend_ledger(tmp_path, server):
    found = _shared_processes(tmp_path, server, "openai/judge", max_calls=3, max_cost_usd=0)
    assert sorted(status for status, _ in found) == ["passed"] * 3 + ["skipped"] * 5
    assert {reason for status, reason in found if status == "skipped"} == {"budget"}
    with sqlite3.connect(tmp_path / "spend.db") as conn:
        [(calls,)] = conn.execute("SELECT calls FROM judgehooks_spend").fetchall()
    assert calls == 3


def test_two_processes_share_max_cost_usd_through_a_sqlite_spend_ledger(tmp_path, server):
    # the first priced call spends the whole cap: after it, neither process judges again this window
    found = _shared_processes(tmp_path, server, PRICED, max_calls=100, max_cost_usd=1e-9)
    graded = [f for f in found if f[0] == "passed"]
    assert 1 <= len(graded) <= 2 and len(found) == 8  # calls already admitted when the cost lands still finish
    assert all(f == ["skipped", "budget"] for f in found if f[0] != "passed")
    with sqlite3.connect(tmp_path / "spend.db") as conn:
        [(calls, cost)] = conn.execute("SELECT calls, cost_usd FROM judgehooks_spend").fetchall()
    assert calls == len(graded) and cost > 1e-9


def test_a_spend_ledger_value_that_is_not_a_number_counts_as_zero(make_judge, make_agent, store, tmp_path):
    ledger = tmp_path / "spend.db"
    judge = make_judge(name="forged-ledger", max_calls=2, spend_ledger=str(ledger))
    agent = make_agent(judge)
    agent.run("q0")
    with sqlite3.connect(ledger) as conn:
        conn.execute("UPDATE judgehooks_spend SET calls = 'many', cost_usd = x'00'")
    for i in range(1, 4):  # counted from zero again: two more calls, then the cap
        agent.run(f"q{i}")
    assert statuses(store) == ["passed", "passed", "passed", "skipped"]


def test_a_spend_ledger_in_a_missing_folder_is_refused_naming_the_path(make_judge, tmp_path):
    """Accepted, it would admit every call uncounted: the caps silently off."""
    missing = tmp_path / "missing-dir"
    said = f"spend_ledger path '{missing / 'spend.db'}': directory '{missing}' does not exist"
    with pytest.raises(ValueError, match=re.escape(said)):
        make_judge(name="no-ledger", max_calls=1, spend_ledger=str(missing / "spend.db"))


def test_a_spend_ledger_unusable_later_admits_the_call_uncounted_and_says_so(make_judge, make_agent, store,
                                                                             tmp_path):
    folder = tmp_path / "removed-later"
    folder.mkdir()
    judge = make_judge(name="no-ledger", max_calls=1, spend_ledger=str(folder / "spend.db"))
    folder.rmdir()  # e.g. a clean-up job: the caps cannot be counted, and that is said
    with capture_logs() as logs:
        make_agent(judge).run("q0")
        make_agent(judge).run("q1")
    assert statuses(store) == ["passed", "passed"]
    [warning, *_] = [e for e in logs if e["event"] == "spend_cap_unavailable"]
    assert warning["error_type"] == "OperationalError" and warning["ledger"].endswith("spend.db")


@pytest.mark.parametrize("value", ["", 3, b"spend.db"])
def test_spend_ledger_must_be_a_file_path(make_judge, value):
    with pytest.raises(TypeError, match="spend_ledger must be the path of a SQLite file"):
        make_judge(name="bad-ledger", max_calls=1, spend_ledger=value)
