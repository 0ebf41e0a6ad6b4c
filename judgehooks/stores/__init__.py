"""Where verdicts go. A store is anything with async `write(records)` and `query(...)`."""

from ._base import Store, write_with_retry
from ._memory import MemoryStore
from ._sqlite import SQLiteStore, default_store

__all__ = ("MemoryStore", "SQLiteStore", "Store", "default_store", "write_with_retry")
