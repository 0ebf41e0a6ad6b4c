"""The pages' store reads (`stores._browse`): SQLite and PostgreSQL answer in SQL what any other
store answers by one pass over its records, and both answers are the same."""

from __future__ import annotations

import functools
from datetime import timedelta

import pytest
from _ui_fixtures import NOW, seeded_records

from judgehooks import MemoryStore, PostgresStore, RecordFilter, SQLiteStore
from judgehooks._runtime import runtime
from judgehooks.stores import _textsearch
from judgehooks.stores._browse import SORTS, Browse, page, tallies
from judgehooks.stores._search import FTS, SearchError
from judgehooks.stores._series import pass_rates, run_series

BROWSES = [
    Browse(),
    Browse(RecordFilter(agent_id="support", evaluator="helpful")),
    Browse(RecordFilter(status="failed", since=NOW - timedelta(hours=20))),
    Browse(version="v1"),
    Browse(session_id="sess-1"),
    Browse(scope="session"),
    Browse(judged=True, borderline=1.0),
    Browse(RecordFilter(evaluator="nobody")),
    Browse(text="zanzibar"),
    Browse(text="Answer, 7!"),
    Browse(text="question answer", user_id="u1"),
    Browse(metadata=(("plan", "pro"),)),
    Browse(metadata=(("tier", "2"), ("beta", "false"))),
    Browse(RecordFilter(status="passed"), user_id="u0", metadata=(("beta", "true"),)),
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


@pytest.mark.parametrize("bucket", ["minute", "10min", "hour", "day", "month"])
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


@pytest.mark.parametrize("ascending", [False, True])
@pytest.mark.parametrize("sort", list(SORTS))
def test_a_sorted_sql_page_is_the_one_pass_page_in_order(sql_store, memory_store, sort, ascending):
    for browse in (Browse(), Browse(RecordFilter(status="failed"))):
        ours = runtime.call(functools.partial(page, sql_store, browse, limit=200, sort=sort, ascending=ascending))
        theirs = runtime.call(functools.partial(page, memory_store, browse, limit=200, sort=sort,
                                                ascending=ascending))
        assert [r.id for r in ours] == [r.id for r in theirs]
        column = {"time": "created_at", "score": "score", "latency": "latency_ms", "cost": "cost_usd",
                  "run_latency": "run_latency_ms", "run_cost": "run_cost_usd"}[sort]
        values = [getattr(r, column) for r in ours]
        valued = [v for v in values if v is not None]
        assert valued == sorted(valued, reverse=not ascending)
        assert browse != Browse() or len(set(valued)) > 3
        assert values == valued + [None] * (len(values) - len(valued))  # records without one come last


def test_search_finds_the_one_record_holding_a_word_in_every_store(sql_store, memory_store):
    for store in (sql_store, memory_store):
        assert [r.id for r in runtime.call(page, store, Browse(text="ZANZIBAR"))] == ["helpful-13"]
        assert runtime.call(page, store, Browse(text="zanzibar question 12")) == []  # every word must be there


def test_a_postgres_text_index_that_cannot_be_built_leaves_the_search_working_and_says_why(postgres_dsn,
                                                                                          monkeypatch):
    """A role that may not create an index (here: the build fails) still searches, unindexed."""
    from structlog.testing import capture_logs


    monkeypatch.setattr(_textsearch, "postgres_index_sql", lambda table: "CREATE INDEX CONCURRENTLY ix ON no_such (x)")
    store = PostgresStore(postgres_dsn, table="eval_records_noindex")
    runtime.call(store.write, seeded_records())
    try:
        with capture_logs() as logs:
            assert [r.id for r in runtime.call(page, store, Browse(text="zanzibar"))] == ["helpful-13"]
        [event] = [e for e in logs if e["event"] == "ui_text_index_not_built"]
        assert event["table"] == "eval_records_noindex" and "no_such" in event["error"]
    finally:
        runtime.call(store.aclose)


def test_search_text_without_a_word_is_refused_naming_q():
    with pytest.raises(SearchError, match="q holds no word"):
        Browse(text='" * ^ -')


@pytest.mark.parametrize("text", ["zanzibar OR NEAR(", "reason:zanzibar", "zanz*", "^zanzibar", "-zanzibar",
                                  "zanzibar') ; DROP TABLE eval_records; --", "NOT zanzibar", "{input reason}: x"])
def test_search_text_is_words_never_query_syntax(sql_store, text):
    found = runtime.call(page, sql_store, Browse(text=text))
    assert all("zanzibar" in (r.reason or "").lower() for r in found)
    assert len(runtime.call(functools.partial(page, sql_store, Browse(), limit=1000))) == 98  # nothing lost


def test_the_sqlite_index_takes_records_written_after_the_first_search_and_an_older_file_gains_one(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    runtime.call(store.write, seeded_records()[:20])
    tables = store._locked(lambda conn: {r[0] for r in conn.execute("SELECT name FROM sqlite_master")})
    assert FTS not in tables  # writing builds no index: a file gains it on its first search
    assert runtime.call(page, store, Browse(text="zanzibar")) == []
    runtime.call(store.write, seeded_records()[20:])
    assert [r.id for r in runtime.call(page, store, Browse(text="zanzibar"))] == ["helpful-13"]
    store.close()


@pytest.mark.parametrize("window", [12, 3])
def test_a_common_words_search_reads_the_newest_records_first_and_answers_as_the_whole_search(
        tmp_path, memory_store, monkeypatch, window):
    """Words that many records hold are searched among the newest records first (a million matches
    listed for 50 newest is what made such a search take seconds): here "many" is 5 and the newest
    are 12, then 120 (more than there are: the whole search), or 3, then 30. Every page is the one
    pass's, whether the newest records fill it or the whole search must."""
    monkeypatch.setattr(_textsearch, "COMMON", 5)
    monkeypatch.setattr(_textsearch, "WINDOW", window)
    answered = []
    real = _textsearch.common_words

    def spy(*args):
        found = real(*args)
        answered.append(found is not None)
        return found

    monkeypatch.setattr(_textsearch, "common_words", spy)
    store = SQLiteStore(tmp_path / "evals.db")
    runtime.call(store.write, seeded_records())
    for browse in (Browse(text="answer"), Browse(text="Question answer", user_id="u1"), Browse(text="zanzibar"),
                   Browse(RecordFilter(evaluator="polite"), text="answer"), Browse(text="reason", version="v2")):
        for offset, limit in ((0, 5), (5, 5), (0, 50), (40, 10), (11, 3)):
            ours = runtime.call(functools.partial(page, store, browse, offset=offset, limit=limit))
            theirs = runtime.call(functools.partial(page, memory_store, browse, offset=offset, limit=limit))
            assert [r.id for r in ours] == [r.id for r in theirs], (browse, offset, limit)
    assert True in answered and False in answered  # the newest records answered some pages, the whole search others
    store.close()


@pytest.mark.parametrize("rare", [5, 10_000])
def test_a_postgres_search_lists_rare_words_through_the_index_and_walks_time_for_common_ones(
        sql_store, memory_store, monkeypatch, rare):
    """PostgreSQL: words in fewer than `PG_RARE` records are listed through the text index first,
    common ones left to the planner (here "rare" is 5, then everything): the same pages."""
    monkeypatch.setattr(_textsearch, "PG_RARE", rare)
    for browse in (Browse(text="answer"), Browse(text="zanzibar"),
                   Browse(RecordFilter(evaluator="polite"), text="answer"),
                   Browse(text="question answer", user_id="u1")):
        for offset, limit in ((0, 5), (7, 10), (0, 200)):
            ours = runtime.call(functools.partial(page, sql_store, browse, offset=offset, limit=limit))
            theirs = runtime.call(functools.partial(page, memory_store, browse, offset=offset, limit=limit))
            assert [r.id for r in ours] == [r.id for r in theirs], (browse, offset, limit)


def test_an_older_files_search_index_is_replaced_on_its_first_search(tmp_path):
    import sqlite3

    store = SQLiteStore(tmp_path / "evals.db")
    runtime.call(store.write, seeded_records())
    store.close()
    conn = sqlite3.connect(tmp_path / "evals.db")  # the index of before: keyed by record id
    conn.execute("CREATE VIRTUAL TABLE eval_records_fts USING fts5(rid UNINDEXED, input, output, reason)")
    conn.execute("CREATE TABLE eval_records_fts_state (one INTEGER PRIMARY KEY, upto INTEGER)")
    conn.execute("INSERT INTO eval_records_fts (rid, input, output, reason) VALUES ('helpful-01', 'zanzibar', '', '')")
    conn.commit()
    conn.close()
    store = SQLiteStore(tmp_path / "evals.db")
    assert [r.id for r in runtime.call(page, store, Browse(text="zanzibar"))] == ["helpful-13"]
    tables = store._locked(lambda conn: {r[0] for r in conn.execute("SELECT name FROM sqlite_master")})
    assert FTS in tables and "eval_records_fts" not in tables and "eval_records_fts_state" not in tables
    store.close()


def _rounded(rows):
    return [tuple(round(v, 9) if isinstance(v, float) else v for v in row) for row in rows]


@pytest.mark.parametrize("bucket", ["hour", "day"])
@pytest.mark.parametrize("browse", BROWSES[:4])
def test_sql_run_series_count_each_run_once_as_the_one_pass_does(sql_store, memory_store, browse, bucket):
    ours = runtime.call(run_series, sql_store, browse, bucket)
    assert _rounded(ours) == _rounded(runtime.call(run_series, memory_store, browse, bucket))
    if browse == Browse() and bucket == "day":
        assert sum(n for _, n, *_ in ours) == 49  # 48 runs graded twice each, and run-x: once each
        latencies = [r.run_latency_ms for r in seeded_records() if r.evaluator == "helpful"
                     and r.run_latency_ms is not None]
        cost = sum(r.run_cost_usd for r in seeded_records() if r.evaluator == "helpful" and r.run_cost_usd)
        assert round(sum(c for *_, c, _ in ours if c), 9) == round(cost, 9)  # never twice for two evaluators
        assert min(lat for _, _, lat, *_ in ours if lat) >= min(latencies)
