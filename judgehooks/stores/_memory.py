"""MemoryStore: records in a dict, for tests and notebooks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from .._base.record import EvalRecord
from ._base import select


class MemoryStore:
    """In-process store, idempotent on record id. Lost at exit: use it for tests only."""

    def __init__(self) -> None:
        self._records: dict[str, EvalRecord] = {}

    async def write(self, records: Sequence[EvalRecord]) -> None:
        for record in records:
            self._records.setdefault(record.id, record)

    async def query(self, *, agent_id: str | None = None, team_id: str | None = None,
                    evaluator: str | None = None, status: str | None = None, run_id: str | None = None,
                    since: datetime | None = None, until: datetime | None = None,
                    limit: int | None = 1000) -> list[EvalRecord]:
        return select(self._records.values(), agent_id=agent_id, team_id=team_id, evaluator=evaluator,
                      status=status, run_id=run_id, since=since, until=until, limit=limit)

    @property
    def records(self) -> list[EvalRecord]:
        """Every record, oldest first."""
        return sorted(self._records.values(), key=lambda r: r.created_at)

    async def aclose(self) -> None:
        return None
