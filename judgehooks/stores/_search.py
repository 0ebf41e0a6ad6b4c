"""Full-text search over a record's input, output and reason, the same words in every store:
SQLite through an FTS5 index of its own, PostgreSQL through its text search (``'simple'``: no
stemming, as FTS5's tokenizer), any other store by a plain scan. A search is words: every word must
be in the record (in any of the three texts), case and accents aside. The words are never query
syntax: each goes to FTS5 as a quoted string and to PostgreSQL through ``plainto_tsquery``.

SQLite's index (``eval_records_fts``, beside the records) is filled by the searches, not by the
writes: a search first indexes the records written since the last one (in short write transactions,
so the hook's writes wait at most one batch), so writing a record costs nothing more, and an older
file gains its index on its first search."""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from typing import Any

from .._base.record import EvalRecord

FTS = "eval_records_fts"
_STATE = "eval_records_fts_state"
#: rows indexed per write transaction: a concurrent writer waits at most this long
BATCH = 5000
#: words a search may hold
MAX_WORDS = 32
_WORD = re.compile(r"[^\W_]+")  # "_" separates words, as in FTS5's tokenizer


class SearchError(ValueError):
    """Search text with no word to search for, or too many."""


def words(text: str) -> tuple[str, ...]:
    """The words of `text` as every store matches them: letters and digits, lower case, accents
    dropped (FTS5's ``unicode61`` tokenizer's rule)."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c))
    return tuple(_WORD.findall(folded))


def search_words(text: str) -> tuple[str, ...]:
    """The words a search asks for, or SearchError naming what is wrong with it."""
    found = tuple(dict.fromkeys(words(text)))
    if not found:
        raise SearchError("q holds no word to search for (letters or digits)")
    if len(found) > MAX_WORDS:
        raise SearchError(f"q holds {len(found)} words; search with at most {MAX_WORDS}")
    return found


def matches(record: EvalRecord, wanted: tuple[str, ...]) -> bool:
    """The plain scan: every wanted word is a word of the record's input, output or reason."""
    have = set(words(f"{record.input}\n{record.output}\n{record.reason or ''}"))
    return all(w in have for w in wanted)


def fts5_query(wanted: tuple[str, ...]) -> str:
    """The words as an FTS5 query: each a quoted string (never an operator, column or prefix)."""
    return " ".join('"' + w.replace('"', '""') + '"' for w in wanted)


def sqlite_condition(wanted: tuple[str, ...]) -> tuple[str, list[Any]]:
    """The SQLite condition on the records table (after `sqlite_catch_up`)."""
    return f"id IN (SELECT rid FROM {FTS} WHERE {FTS} MATCH ?)", [fts5_query(wanted)]


#: the text PostgreSQL searches, as its expression index names it
POSTGRES_DOCUMENT = ("to_tsvector('simple', coalesce(input, '') || ' ' || coalesce(output, '') || ' ' "
                     "|| coalesce(reason, ''))")


def postgres_condition(text: str) -> tuple[str, list[Any]]:
    """The PostgreSQL condition: `text` as typed (``plainto_tsquery`` reads only its words; the
    'simple' configuration keeps accents, so on PostgreSQL "cafe" does not find "café")."""
    return f"{POSTGRES_DOCUMENT} @@ plainto_tsquery('simple', %s)", [text]


def postgres_index_sql(table: str) -> str:
    """The index that makes a search on a large table fast: built once, on the first search,
    without blocking writers (CONCURRENTLY)."""
    return f"CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_{table}_text ON {table} USING GIN ({POSTGRES_DOCUMENT})"


def sqlite_catch_up(conn: sqlite3.Connection, table: str) -> None:
    """Create the FTS5 index if this file has none, and index the records written since the last
    search, `BATCH` rows per write transaction. Records are only ever added, so the records table's
    rowid says how far the index reaches."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5(rid UNINDEXED, input, output, reason, "
                 "tokenize='unicode61 remove_diacritics 2')")
    conn.execute(f"CREATE TABLE IF NOT EXISTS {_STATE} (one INTEGER PRIMARY KEY CHECK (one = 1), upto INTEGER)")
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(f"SELECT upto FROM {_STATE} WHERE one = 1").fetchone()
            upto = row[0] if row else 0
            rows = conn.execute(f"SELECT rowid, id, input, output, coalesce(reason, '') FROM {table} "
                                f"WHERE rowid > ? ORDER BY rowid LIMIT {BATCH}", (upto,)).fetchall()
            if rows:
                conn.executemany(f"INSERT INTO {FTS} (rid, input, output, reason) VALUES (?, ?, ?, ?)",
                                 [r[1:] for r in rows])
                conn.execute(f"INSERT INTO {_STATE} (one, upto) VALUES (1, ?) "
                             "ON CONFLICT (one) DO UPDATE SET upto = excluded.upto", (rows[-1][0],))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if len(rows) < BATCH:
            return
