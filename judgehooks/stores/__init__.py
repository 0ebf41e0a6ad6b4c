"""Where verdicts go. A store is anything with async `write(records)` and `query(...)`."""

from typing import Any

from ._base import Store, iter_records, write_with_retry
from ._jsonl import JsonlStore
from ._memory import MemoryStore
from ._sqlite import SQLiteStore, default_store
from ._url import store_from_url

__all__ = ("JsonlStore", "MemoryStore", "PostgresStore", "SQLiteStore", "Store", "default_store", "iter_records",
           "store_from_url", "write_with_retry")


def __getattr__(name: str) -> Any:
    # psycopg is an optional extra (judgehooks[postgres]): import it only when asked for.
    if name == "PostgresStore":
        from ._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
