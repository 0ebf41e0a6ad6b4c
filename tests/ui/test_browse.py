"""The pages' store reads (`stores._browse`): SQLite and PostgreSQL answer in SQL what any other
store answers by one pass over its records, and both answers are the same."""

from __future__ import annotations

import functools
from datetime import timedelta

import pytest
from _ui_fixtures import NOW, seeded_records

from judgehooks import MemoryStore, PostgresStore, RecordFilter, SQLiteStore
from judgehooks._runtime import runtime
from judgehooks.stores._browse import Browse, page, pass_rates, tallies

BROWSES = [
    Browse(),
    Browse(RecordFilter(agent_id="support", evaluator="helpful")),
    Browse(RecordFilter(status="failed", since=NOW - timedelta(hours=20))),
    Browse(version="v1"),
    Browse(session_id="sess-1"),
    Browse(scope="session"),
    Browse(judged=True, borderline=1.0),
    Browse(RecordFilter(evaluator="nobody")),
]


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request, tmp_path):
    if request.param == "sqlite":
        store = SQLiteStore(tmp_path / "evals.db")
    else:
        store = PostgresStore(request.getfixturevalue("postgres_dsn"))
    runtime.call(store.write, seeded_records())
    yield store
    runtime.call(store.aclose)


@pytest.fixture
def memory_store():
    store = MemoryStore()
    runtime.call(store.write, seeded_records())
    return store


def _tallies(store, browse):
    return sorted((t.key, t.n, t.passed, t.failed, t.error, t.skipped, round(t.latency_ms, 6), t.timed,
                   round(t.cost_usd, 9), t.first, t.last, t.names) for t in runtime.call(tallies, store, browse))


@pytest.mark.parametrize("browse", BROWSES)
def test_sql_tallies_are_the_one_pass_tallies(sql_store, memory_store, browse):
    assert _tallies(sql_store, browse) == _tallies(memory_store, browse)


@pytest.mark.parametrize("bucket", ["hour", "day"])
@pytest.mark.parametrize("browse", BROWSES[:4])
def test_sql_pass_rates_per_bucket_are_the_one_pass_rates(sql_store, memory_store, browse, bucket):
    ours = runtime.call(pass_rates, sql_store, browse, bucket)
    assert ours == runtime.call(pass_rates, memory_store, browse, bucket)
    if browse == Browse():
        assert sum(n for *_, n, _ in ours) == 97  # every verdict: 98 records less the one error


@pytest.mark.parametrize("browse", BROWSES)
def test_a_sql_page_is_the_one_pass_page(sql_store, memory_store, browse):
    for offset, limit in ((0, 10), (10, 10), (90, 50)):
        ours = [r.id for r in runtime.call(functools.partial(page, sql_store, browse, offset=offset, limit=limit))]
        theirs = [r.id for r in runtime.call(functools.partial(page, memory_store, browse, offset=offset,
                                                               limit=limit))]
        assert ours == theirs, (offset, limit)
