"""Where verdicts go. A store is anything with async `write(records)` and `query(...)`; subclass
`BaseStore` to get `query` / `iter_records` from one `_query(where: RecordFilter, limit)` and no-op
`aclose` / `stats`.

`PostgresStore` needs the `postgres` extra (psycopg) when it is constructed, not when imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base.lazy import attach

if TYPE_CHECKING:
    from ._agno import AgnoDbStore
    from ._base import BaseStore, RecordFilter, Store, iter_records, write_with_retry
    from ._fanout import FanoutStore
    from ._jsonl import JsonlStore
    from ._memory import MemoryStore
    from ._postgres import PostgresStore
    from ._spill import SpillingStore
    from ._sqlite import SQLiteStore
    from ._url import default_store, store_from_url

__getattr__, __dir__ = attach(__name__, {
    "._agno": ("AgnoDbStore",),
    "._base": ("BaseStore", "RecordFilter", "Store", "iter_records", "write_with_retry"),
    "._fanout": ("FanoutStore",),
    "._jsonl": ("JsonlStore",),
    "._memory": ("MemoryStore",),
    "._postgres": ("PostgresStore",),
    "._spill": ("SpillingStore",),
    "._sqlite": ("SQLiteStore",),
    "._url": ("default_store", "store_from_url"),
})

__all__ = ("AgnoDbStore", "BaseStore", "FanoutStore", "JsonlStore", "MemoryStore", "PostgresStore", "RecordFilter",
           "SQLiteStore", "SpillingStore", "Store", "default_store", "iter_records", "store_from_url",
           "write_with_retry")
