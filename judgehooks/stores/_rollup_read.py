"""Counting a SQL store for the UI through its hourly rollup (`stores._rollup`): which parts of a
question the rollup answers and which the records do (`parts`), and bringing the rollup up to date
first (`roll_up`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import anyio.to_thread

from .._runtime import runtime
from . import _rollup, _rollup_meta
from ._base import Store
from ._postgres import PostgresStore
from ._sqlite import TABLE, SQLiteStore

#: the rollup's counts by status, as `_browse._COUNTS` counts the records
ROLLED_STATUS = ", ".join(f"SUM(CASE WHEN status = '{status}' THEN n ELSE 0 END)"
                           for status in ("passed", "failed", "error", "skipped"))


async def parts(store: Store, browse: Any, key: str | None = None
                ) -> list[tuple[Any, tuple[str | None, str | None] | None]]:
    """How to count what `browse` selects in a SQL store: [(browse, hours)]: the rollup for the whole
    hours (`stores._rollup`; with `key`, that metadata key's counts, `stores._rollup_meta`) when it
    can answer, and the records for the parts of an hour at either edge (hours None); just
    [(browse, None)] when the rollup cannot answer."""
    if not _rollup.covers(browse):
        return [(browse, None)]
    cut = _rollup.split(browse.where.since, browse.where.until)
    found: list[tuple[Any, tuple[str | None, str | None] | None]] = [
        (browse.replace(where=browse.where.replace(since=since, until=until), by_time=True), None)
        for since, until in cut.edges]
    if cut.hours is not None:
        reach = await roll_up(store, key)
        if reach is None:  # a key whose counts are not kept
            return [(browse, None)]
        found.append((browse, cut.hours))
        # in the same hours, the records the rollup does not reach yet (written a moment ago)
        since, until = (None if hour is None else datetime.fromisoformat(f"{hour}:00:00+00:00") for hour in cut.hours)
        found.append((browse.replace(where=browse.where.replace(since=since, until=until), unfolded=reach,
                                     by_time=True), None))
    return found


async def roll_up(store: Store, key: str | None = None) -> int | None:
    """Bring the store's rollup up to date (with `key`, that metadata key's counts,
    `stores._rollup_meta`); how far it reaches (`Browse.unfolded`), or None when the key's counts are
    not kept."""
    if isinstance(store, SQLiteStore):  # a batch at a time: the store's writers go between them
        def batch(conn: Any) -> tuple[bool, int | None]:
            if key is None:
                return _rollup.sqlite_catch_up(conn, TABLE)
            return _rollup_meta.sqlite_catch_up(conn, TABLE, key)

        while True:
            more, reach = await anyio.to_thread.run_sync(store._locked, batch)
            if not more:
                return None if reach is None else int(reach)
    assert isinstance(store, PostgresStore)

    async def fold() -> int | None:
        pool = await store._pool()
        async with pool.connection() as conn:
            if key is None:
                return await _rollup.postgres_catch_up(conn, store.table)
            return await _rollup_meta.postgres_catch_up(conn, store.table, key)

    reach = await runtime.on_loop(fold)
    return None if reach is None else int(reach)
