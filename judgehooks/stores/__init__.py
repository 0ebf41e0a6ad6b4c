"""Where verdicts go. A store is anything with async `write(records)` and `query(...)`."""

from ._base import Store, iter_records, write_with_retry
from ._memory import MemoryStore
from ._sqlite import SQLiteStore, default_store
from ._url import store_from_url

__all__ = ("MemoryStore", "SQLiteStore", "Store", "default_store", "iter_records", "store_from_url",
           "write_with_retry")
