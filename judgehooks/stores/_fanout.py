"""FanoutStore: one write to several stores (judgehooks' own, plus agno's db for AgentOS)."""

from __future__ import annotations

from collections.abc import Sequence

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

    async def aclose(self) -> None:
        for store in self.stores:
            await store.aclose()
