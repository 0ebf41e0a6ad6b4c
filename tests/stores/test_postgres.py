"""PostgresStore against a real PostgreSQL server."""

from __future__ import annotations

import psycopg
import pytest
from conftest import rec

from judgehooks import PostgresStore
from judgehooks._base.record import FIELDS

pytestmark = pytest.mark.anyio


async def test_schema_is_created_on_first_use_one_column_per_field_and_the_txid(postgres_dsn):
    store = PostgresStore(postgres_dsn)
    await store.write([rec(1)])
    await store.aclose()
    with psycopg.connect(postgres_dsn) as conn:
        columns = [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'eval_records' "
            "ORDER BY ordinal_position")]
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'eval_records'")}
        types = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                                  "WHERE table_name = 'eval_records'").fetchall())
    assert columns == [*FIELDS, "txid"]  # and the inserting transaction's id, which the database sets (the rollup)
    assert {"ix_eval_records_agent", "ix_eval_records_team", "ix_eval_records_created", "ix_eval_records_graded",
            "ix_eval_records_window"} <= indexes  # the last two: `judgehooks ui`'s (`stores._indexes`)
    assert (types["created_at"], types["passed"], types["metadata"]) == ("timestamp with time zone", "boolean", "jsonb")


@pytest.mark.parametrize("given", [None, "-c search_path=elsewhere -c work_mem=64MB"], ids=["plain", "dsn options"])
async def test_connections_keep_the_dsns_options_and_have_work_mem_for_the_ui(postgres_dsn, given, monkeypatch):
    """The store's own connection options (JIT off) go before the dsn's (or $PGOPTIONS'), never in
    their place: a search_path there is where the table goes. work_mem is raised to WORK_MEM for the
    UI's text-search bitmaps, never lowered."""
    from urllib.parse import quote

    from judgehooks.stores._postgres import WORK_MEM

    if given is not None:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA elsewhere")
    store = PostgresStore(postgres_dsn if given is None else f"{postgres_dsn}?options={quote(given)}")
    await store.write([rec(1)])
    pool = await store._pool()
    async with pool.connection() as conn:
        settings = [(await (await conn.execute(f"SHOW {name}")).fetchone())[0]
                    for name in ("jit", "work_mem", "search_path")]
    await store.aclose()
    if given is None:
        assert settings[:2] == ["off", WORK_MEM]
    else:
        assert settings == ["off", "64MB", "elsewhere"]
        with psycopg.connect(postgres_dsn) as conn:  # the table went where the dsn's search_path says
            assert conn.execute("SELECT table_schema FROM information_schema.tables "
                                "WHERE table_name = 'eval_records'").fetchall() == [("elsewhere",)]
    monkeypatch.setenv("PGOPTIONS", "-c work_mem=32MB")  # the environment's, when the dsn gives none
    assert "-c work_mem=32MB" in PostgresStore(postgres_dsn)._connect_kwargs()["options"]


@pytest.mark.parametrize("size", [3, 200], ids=["executemany", "copy"])
async def test_batches_are_idempotent_on_id_and_round_trip(postgres_dsn, size):
    store = PostgresStore(postgres_dsn)
    await store.write([rec(i) for i in range(size)])
    # a re-delivered batch, overlapping the first and with a duplicate inside itself
    await store.write([rec(0, status="failed", passed=False), rec(size), rec(size)]
                      + [rec(i) for i in range(1, size)])
    records = await store.query(limit=None)
    await store.aclose()
    assert sorted(r.id for r in records) == sorted(f"id-{i}" for i in range(size + 1))
    first = next(r for r in records if r.id == "id-0")
    assert first == rec(0, created_at=first.created_at) and first.status == "passed"


async def test_nul_characters_are_replaced_not_refused(postgres_dsn):
    store = PostgresStore(postgres_dsn)
    await store.write([rec(1, output="a\x00b", metadata={"x": "c\x00d"})])
    [got] = await store.query()
    await store.aclose()
    assert (got.output, got.metadata) == ("a\ufffdb", {"x": "c\ufffdd"})


def test_hook_records_land_in_postgres_from_sync_and_async_runs(make_judge, make_agent, postgres_dsn):
    import anyio

    store = PostgresStore(postgres_dsn)
    agent = make_agent(make_judge(store=store), id="pg-agent")
    run_ids = [agent.run(f"q{i} [[score=9]]").run_id for i in range(2)]
    run_ids.append(anyio.run(lambda: agent.arun("q async [[fail]]")).run_id)
    stored = anyio.run(lambda: store.query(agent_id="pg-agent"))  # from a different event loop
    assert sorted(r.run_id for r in stored) == sorted(run_ids)
    assert sorted(r.status for r in stored) == ["failed", "passed", "passed"]


@pytest.mark.parametrize(("options", "message"), [
    ({"dsn": ""}, "dsn must be a non-empty"),
    ({"table": "evals; drop"}, "table 'evals; drop' must be a plain SQL identifier"),
    ({"min_size": 5, "max_size": 2}, "min_size <= max_size"),
    ({"timeout": 0}, "timeout must be a number of seconds > 0"),
])
def test_bad_settings_are_refused_naming_the_parameter(options, message):
    settings = {"dsn": "postgresql://127.0.0.1/x", **options}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(";", ";")):
        PostgresStore(**settings)
