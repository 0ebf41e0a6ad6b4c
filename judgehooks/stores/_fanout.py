"""FanoutStore: one write to several stores (judgehooks' own, plus agno's db for AgentOS)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from .._base.feedback import Feedback
from .._base.label import Label
from .._base.record import EvalRecord
from ._base import BaseStore, RecordFilter, Store


class FanoutStore(BaseStore):
    """Writes to every store; reads from the first."""

    def __init__(self, primary: Store, *mirrors: Store) -> None:
        self.stores = (primary, *mirrors)

    def __repr__(self) -> str:
        return f"FanoutStore({', '.join(map(repr, self.stores))})"

    async def write(self, records: Sequence[EvalRecord]) -> None:
        errors = []
        for store in self.stores:
            try:
                await store.write(records)
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    async def _query(self, where: RecordFilter, limit: int | None) -> list[EvalRecord]:
        return await self.stores[0].query(**where.keywords(), limit=limit)

    async def records_by_id(self, ids: Collection[str]) -> list[EvalRecord]:
        inner = self.stores[0]
        return await (inner.records_by_id(ids) if isinstance(inner, BaseStore) else super().records_by_id(ids))

    async def write_labels(self, labels: Sequence[Label]) -> None:
        """Kept by the store records are read from."""
        inner = self.stores[0]
        await (inner.write_labels(labels) if isinstance(inner, BaseStore) else super().write_labels(labels))

    async def read_labels(self) -> list[Label]:
        inner = self.stores[0]
        return await (inner.read_labels() if isinstance(inner, BaseStore) else super().read_labels())

    async def write_feedback(self, items: Sequence[Feedback]) -> None:
        """Kept by the store records are read from."""
        inner = self.stores[0]
        await (inner.write_feedback(items) if isinstance(inner, BaseStore) else super().write_feedback(items))

    async def read_feedback(self, run_ids: Collection[str] | None = None) -> list[Feedback]:
        inner = self.stores[0]
        return await (inner.read_feedback(run_ids) if isinstance(inner, BaseStore) else super().read_feedback(run_ids))

    async def aclose(self) -> None:
        for store in self.stores:
            await store.aclose()
