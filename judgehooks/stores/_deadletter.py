"""Dead letters: records a store refused for good (e.g. a count past its column's range), moved out
of the spill after `max_tries` so the records behind them flow on. They stay in the spill file's
`eval_dead_letters` table, whole, with the store's last error: nothing is lost, and
`judgehooks report` and `judgehooks.stats()` show how many there are."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

TABLE = "eval_dead_letters"
SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        store TEXT NOT NULL,
        id TEXT NOT NULL,
        record TEXT NOT NULL,
        error TEXT NOT NULL,
        tries INTEGER NOT NULL,
        dead_at REAL NOT NULL
    )""",
)


def bury(conn: sqlite3.Connection, seq: int, error: str, stand_in: str | None = None) -> None:
    """Move spill row `seq` into the dead letters (the caller holds the transaction); with a
    `stand_in` (a record's JSON), copy it there and leave that record in its place, to be delivered."""
    conn.execute(f"INSERT INTO {TABLE} (store, id, record, error, tries, dead_at) "
                 "SELECT store, id, record, ?, tries, ? FROM eval_spill WHERE seq = ?", (error, time.time(), seq))
    if stand_in is None:
        conn.execute("DELETE FROM eval_spill WHERE seq = ?", (seq,))
    else:
        conn.execute("UPDATE eval_spill SET record = ? WHERE seq = ?", (stand_in, seq))


def count(conn: sqlite3.Connection, store: str | None = None) -> int:
    sql, args = f"SELECT COUNT(*) FROM {TABLE}", tuple[str, ...]()
    if store is not None:
        sql, args = sql + " WHERE store = ?", (store,)
    found: int = conn.execute(sql, args).fetchone()[0]
    return found


def summary(path: str, latest: int = 5) -> dict[str, Any]:
    """What the spill file at `path` holds in dead letters: how many per store, and the newest few
    (id, store, error). Reads only; an absent file or table holds none."""
    empty: dict[str, Any] = {"file": path, "count": 0, "by_store": {}, "latest": []}
    if not os.path.exists(path):
        return empty
    conn = sqlite3.connect(path, timeout=5)
    # the file is hostile: a blob (bytes) or text that is not UTF-8 (sqlite3 raises reading it) comes as text, U+FFFD
    conn.text_factory = lambda data: data.decode("utf-8", "replace")
    try:
        by_store = dict(conn.execute(f"SELECT CAST(store AS TEXT), COUNT(*) FROM {TABLE} GROUP BY 1 ORDER BY 1"))
        rows = conn.execute(f"SELECT CAST(id AS TEXT), CAST(store AS TEXT), CAST(error AS TEXT), tries, dead_at "
                            f"FROM {TABLE} ORDER BY seq DESC LIMIT ?", (latest,)).fetchall()
    except sqlite3.OperationalError:  # no such table: nothing was ever refused here
        return empty
    finally:
        conn.close()
    return {"file": path, "count": sum(by_store.values()), "by_store": by_store,
            "latest": [{"id": i, "store": s, "error": e, "tries": t, "dead_at": d} for i, s, e, t, d in rows]}
