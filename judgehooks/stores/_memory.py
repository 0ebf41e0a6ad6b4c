"""MemoryStore: records in a dict, for tests and notebooks."""

from __future__ import annotations

from collections.abc import Sequence

from .._base.jsondata import storable
from .._base.record import EvalRecord
from ._base import BaseStore, RecordFilter


class MemoryStore(BaseStore):
    """In-process store, idempotent on record id. Lost at exit: use it for tests only."""

    def __init__(self) -> None:
        self._records: dict[str, EvalRecord] = {}

    async def write(self, records: Sequence[EvalRecord]) -> None:
        for record in records:
            if record.id not in self._records:
                self._records[record.id] = storable(record)  # as a store that serialises would give it back

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        return where.select(self._records.values(), limit)

    @property
    def records(self) -> list[EvalRecord]:
        """Every record, oldest first."""
        return sorted(self._records.values(), key=lambda r: r.created_at)
