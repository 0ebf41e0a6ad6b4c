"""The byte budget of a background dispatcher: how many bytes of jobs (their contexts as JSON) it
holds in its queue and outbox at once. Counts jobs and answers alike, so 2,000 queued 200 KB
answers cannot cost 400 MB of RAM and an outbox as large."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

#: the default budget: 64 MiB of queued jobs per evaluator
DEFAULT_MAX_QUEUE_BYTES = 64 * 1024 * 1024


class ByteBudget:
    """Bytes held per job id, from the hook's hand-off until the job's outbox row goes. Thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, job_id: str, size: int, *, force: bool = False) -> bool:
        """Hold `size` bytes for `job_id`, unless that would pass the limit (False). ``force``: hold
        them anyway (jobs already in the outbox, resumed from a dead process)."""
        with self._lock:
            if not force and self.held + size > self.limit:
                return False
            self.held += size
            self._sizes[job_id] = self._sizes.get(job_id, 0) + size
            return True

    def admit(self, job_id: str, size: int, persist: Callable[[], None] | None) -> str | None:
        """Hold the job's bytes and `persist` it (the outbox insert, if any): None; or why it is shed
        when the budget has no room. A failed `persist` gives its bytes back and raises."""
        if not self.take(job_id, size):  # the skipped record's reason
            return (f"queue full: {size} bytes would pass the byte budget of {self.limit} bytes "
                    f"({self.held} held; max_queue_bytes)")
        try:
            if persist is not None:
                persist()
        except BaseException:
            self.release([job_id])
            raise
        return None

    def release(self, job_ids: Iterable[str]) -> None:
        with self._lock:
            for job_id in job_ids:
                self.held -= self._sizes.pop(job_id, 0)

    def reset(self) -> None:
        """In a forked child: the parent's jobs are not ours."""
        self._lock = threading.Lock()
        self.held, self._sizes = 0, {}
