"""How the records page searches a large SQL store (`stores._browse.page`), beyond the words'
condition itself (`stores._search`): the text index brought up to date before a search, the newest
records first for words many records hold (SQLite), and the text index's list first for words few
records hold (PostgreSQL)."""

from __future__ import annotations

import sqlite3
import weakref
from typing import Any

import anyio.to_thread

from .._base.log import log
from .._base.record import FIELDS
from .._runtime import runtime
from ._base import Store
from ._postgres import PostgresStore
from ._search import postgres_index_sql, search_words, sqlite_catch_up, sqlite_condition, sqlite_matches_at_least
from ._sqlite import TABLE, SQLiteStore, _ts


async def bitmaps(store: PostgresStore, query: str, args: list[Any]) -> list[Any]:
    """`query` on PostgreSQL through its indexes as bitmaps only (the text index's and the filters'),
    never a walk of one index or of the table testing every row."""
    async def fetch() -> list[Any]:
        pool = await store._pool()
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("SET LOCAL enable_seqscan = off")
            await conn.execute("SET LOCAL enable_indexscan = off")
            cur = await conn.execute(query, args)
            return list(await cur.fetchall())

    return list(await runtime.on_loop(fetch))


#: PostgreSQL: words in fewer records than this are listed through the text index first (`page`)
PG_RARE = 2000
#: words in at least this many records are searched among the newest records first (`common_words`)
COMMON = 20000
#: how many of the newest records such a search reads first, then (when the page does not fill from
#: them) ten times as many, before the whole search
WINDOW = 20000


def common_words(conn: sqlite3.Connection, browse: Any, offset: int, limit: int) -> list[Any] | None:
    """A SQLite search, newest first, for words that many records hold: FTS5 would list every one of
    them (a million rows, seconds) to keep the newest few. Searched instead among the `WINDOW`
    newest records (their part of each word's list: a rowid range), then among ten times as many,
    each with the other filters, which answers exactly when the page fills from them. The newest
    records of the store, not of the filters': finding those walks every record when the filters
    are unindexed and keep few (a status and a metadata value: 0.6 s at a million records). None
    when the words are rare, or the page does not fill: the whole search answers then."""
    wanted = search_words(browse.text or "")
    if not sqlite_matches_at_least(conn, wanted, COMMON):
        return None
    rest, args = browse.replace(text=None).sql("?", _ts)
    for window in (WINDOW, 10 * WINDOW):
        edge = conn.execute(f"SELECT created_at FROM {TABLE} ORDER BY created_at DESC LIMIT 1 OFFSET {window}"
                            ).fetchone()
        if edge is None:  # fewer records than that: the whole search reads no more
            return None
        # every record newer than the edge, and where the words' lists start to hold them (+rowid: read
        # from the time index; MIN(rowid) alone walks the table from its first row, 0.2 s)
        first = conn.execute(f"SELECT MIN(+rowid) FROM {TABLE} WHERE created_at > ?", [edge[0]]).fetchone()[0]
        text, bound = sqlite_condition(wanted, from_rowid=first)
        newer = f"{rest + ' AND ' if rest else ''}created_at > ?"
        rows = conn.execute(f"SELECT {', '.join(FIELDS)} FROM {TABLE} WHERE {newer} AND {text} "
                            f"ORDER BY created_at DESC, rowid DESC LIMIT {int(limit)} OFFSET {int(offset)}",
                            [*args, edge[0], *bound]).fetchall()
        if len(rows) == limit:
            return rows
    return None


async def index_text(store: Store) -> None:
    """Bring the store's text index up to date before a search: SQLite's FTS5 table takes the
    records written since the last search; PostgreSQL's index is built on the first search."""
    if isinstance(store, SQLiteStore):
        await anyio.to_thread.run_sync(store._locked, lambda conn: sqlite_catch_up(conn, TABLE))
    elif isinstance(store, PostgresStore) and store not in _TEXT_INDEXED:
        async def build() -> None:
            pool = await store._pool()
            async with pool.connection() as conn:  # autocommit: CONCURRENTLY runs outside a transaction
                cur = await conn.execute("SELECT to_regclass(%s) IS NULL", (f"ix_{store.table}_text",))
                if (await cur.fetchone())[0]:
                    await conn.execute(postgres_index_sql(store.table))
                    # the planner's statistics of the indexed text, without which it may walk the time
                    # index testing every row for a rare word (20 s at a million records, against 20 ms)
                    await conn.execute(f"ANALYZE {store.table}")

        try:
            await runtime.on_loop(build)
        except Exception as exc:  # a role that may not create an index: the search runs unindexed, slower
            log.warning("ui_text_index_not_built", table=store.table, error_type=type(exc).__name__, error=str(exc),
                        note="searches scan the table; build the index as the table's owner (see docs/how-to/ui.md)")
        _TEXT_INDEXED.add(store)  # tried once per process


#: the PostgreSQL stores whose text index this process has seen built
_TEXT_INDEXED: weakref.WeakSet[PostgresStore] = weakref.WeakSet()
