"""MemoryStore: records in a dict, for tests and notebooks."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from .._base.feedback import Feedback
from .._base.jsondata import storable
from .._base.label import Label
from .._base.record import EvalRecord
from . import _feedback
from ._base import BaseStore, RecordFilter


class MemoryStore(BaseStore):
    """In-process store, idempotent on record id. Lost at exit: use it for tests only."""

    def __init__(self) -> None:
        self._records: dict[str, EvalRecord] = {}
        self._labels: dict[tuple[str, str], Label] = {}
        self._feedback: dict[str, Feedback] = {}

    async def write(self, records: Sequence[EvalRecord]) -> None:
        for record in records:
            if record.id not in self._records:
                self._records[record.id] = storable(record)  # as a store that serialises would give it back

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        return where.select(self._records.values(), limit)

    async def records_by_id(self, ids: Collection[str]) -> list[EvalRecord]:
        return [self._records[i] for i in set(ids) if i in self._records]

    async def write_labels(self, labels: Sequence[Label]) -> None:
        for label in labels:
            self._labels[(label.record_id, label.reviewer)] = label

    async def read_labels(self) -> list[Label]:
        return list(self._labels.values())

    async def write_feedback(self, items: Sequence[Feedback]) -> None:
        for item in items:
            self._feedback[item.id] = item

    async def read_feedback(self, run_ids: Collection[str] | None = None) -> list[Feedback]:
        wanted = None if run_ids is None else set(run_ids)
        return _feedback.sort([f for f in self._feedback.values() if wanted is None or f.run_id in wanted])

    @property
    def records(self) -> list[EvalRecord]:
        """Every record, oldest first."""
        return sorted(self._records.values(), key=lambda r: r.created_at)
