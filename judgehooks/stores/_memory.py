"""MemoryStore: records in a dict, for tests and notebooks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from .._record import EvalRecord
from ._base import matches


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
        found = [r for r in self._records.values()
                 if matches(r, agent_id=agent_id, team_id=team_id, evaluator=evaluator, status=status,
                            run_id=run_id, since=since, until=until)]
        found.sort(key=lambda r: r.created_at, reverse=True)
        return found if limit is None else found[:limit]

    @property
    def records(self) -> list[EvalRecord]:
        """Every record, oldest first."""
        return sorted(self._records.values(), key=lambda r: r.created_at)

    async def aclose(self) -> None:
        return None
