"""Full-text search over a record's input, output and reason, the same words in every store:
SQLite through an FTS5 index of its own, PostgreSQL through its text search (``'simple'``: no
stemming, as FTS5's tokenizer), any other store by a plain scan. A search is words: every word must
be in the record (in any of the three texts), case and accents aside. The words are never query
syntax: each goes to FTS5 as a quoted string and to PostgreSQL through ``plainto_tsquery``.

SQLite's index (``eval_records_search``, beside the records; each record under its own rowid) is
filled by the searches, not by the writes: a search first indexes the records written since the last
one (in short write transactions, so the hook's writes wait at most one batch), so writing a record
costs nothing more, and an older file gains its index on its first search (an index of an older
version, ``eval_records_fts``, is replaced then)."""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from typing import Any

from .._base.record import EvalRecord

FTS = "eval_records_search"
_STATE = "eval_records_search_state"
#: the index of before, keyed by record id rather than rowid: dropped when this one is made
_OLD = ("eval_records_fts", "eval_records_fts_state")
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


def sqlite_condition(wanted: tuple[str, ...], *, from_rowid: int | None = None) -> tuple[str, list[Any]]:
    """The SQLite condition on the records table (after `sqlite_catch_up`); ``from_rowid``: only the
    records from this rowid on (FTS5 skips the rest of each word's list)."""
    if from_rowid is None:
        return f"rowid IN (SELECT rowid FROM {FTS} WHERE {FTS} MATCH ?)", [fts5_query(wanted)]
    return (f"rowid IN (SELECT rowid FROM {FTS} WHERE {FTS} MATCH ? AND rowid >= ?)",
            [fts5_query(wanted), int(from_rowid)])


def sqlite_matches_at_least(conn: sqlite3.Connection, wanted: tuple[str, ...], n: int) -> bool:
    """Whether at least `n` records hold the words (reading at most `n` of FTS5's matches)."""
    row = conn.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM {FTS} WHERE {FTS} MATCH ? LIMIT {int(n)})",
                       (fts5_query(wanted),)).fetchone()
    return bool(row and row[0] >= n)


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
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (FTS,)).fetchone() is None:
        for old in _OLD:
            conn.execute(f"DROP TABLE IF EXISTS {old}")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5(input, output, reason, "
                 "tokenize='unicode61 remove_diacritics 2')")
    conn.execute(f"CREATE TABLE IF NOT EXISTS {_STATE} (one INTEGER PRIMARY KEY CHECK (one = 1), upto INTEGER)")
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(f"SELECT upto FROM {_STATE} WHERE one = 1").fetchone()
            upto = row[0] if row else 0
            rows = conn.execute(f"SELECT rowid, input, output, coalesce(reason, '') FROM {table} "
                                f"WHERE rowid > ? ORDER BY rowid LIMIT {BATCH}", (upto,)).fetchall()
            if rows:  # under the record's own rowid: a search joins on it, and reads a range of it
                conn.executemany(f"INSERT INTO {FTS} (rowid, input, output, reason) VALUES (?, ?, ?, ?)", rows)
                conn.execute(f"INSERT INTO {_STATE} (one, upto) VALUES (1, ?) "
                             "ON CONFLICT (one) DO UPDATE SET upto = excluded.upto", (rows[-1][0],))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if len(rows) < BATCH:
            return
