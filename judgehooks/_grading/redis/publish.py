"""The producer side of distributed grading: the hook persists the job in the local outbox (as in
background mode), and the judgehooks loop hands it to the Redis stream; workers grade it.

Reusing the background Dispatcher keeps every guarantee it has: the hook costs the outbox write and
a hand-off, memory is bounded by `max_queue`, shed jobs become `skipped` records, a crashed
producer's jobs are forwarded by the next process, and `drain()` waits until Redis has them all.
While Redis is unreachable, jobs wait in the outbox and publishing is retried with backoff.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import anyio
from redis.exceptions import RedisError
from taskiq.kicker import AsyncKicker

from ..._base.context import EvalContext
from ..._base.log import log
from ..dispatcher import Dispatcher
from ..outbox import Job
from . import redacted
from .broker import TASK_NAME, JudgeStreamBroker


def job_payload(job: Job) -> str:
    """One job as the JSON text the stream carries (the same fields the outbox keeps)."""
    return json.dumps({"id": job.id, "evaluator": job.evaluator, "context": job.context,
                       "sample_rate": job.sample_rate, "spec": job.spec, "created_at": job.created_at},
                      default=str, ensure_ascii=False)


class Forwarder(Dispatcher):
    """A background dispatcher whose step is "publish to Redis" instead of "judge"."""

    judges_here = False

    def __init__(self, *args: Any, broker_url: str, **kwargs: Any) -> None:
        # Outbox deletes come at publishing speed (not the judge's): fewer, larger ones keep the
        # hook's outbox write from queueing behind them.
        kwargs.setdefault("batch_size", 256)
        kwargs.setdefault("flush_interval", 0.1)
        super().__init__(*args, **kwargs)
        self.broker_url = broker_url
        self._broker: JudgeStreamBroker | None = None
        self._broker_loop: asyncio.AbstractEventLoop | None = None
        self._down_since: float | None = None

    async def _connected(self) -> JudgeStreamBroker:
        loop = asyncio.get_running_loop()
        if self._broker is None or self._broker_loop is not loop:  # Redis connections belong to one loop
            broker = JudgeStreamBroker(self.broker_url, max_connections=self.max_concurrency + 2)
            await broker.startup()  # creates the stream and the workers' group, so no job predates it
            self._broker, self._broker_loop = broker, loop
        return self._broker

    async def _grade(self, job: Job, ctx: EvalContext) -> None:
        payload = job_payload(job)
        delay = 0.05
        while True:
            try:
                await AsyncKicker(TASK_NAME, await self._connected(), {}).kiq(job=payload)
                break
            except (RedisError, OSError) as exc:
                if self._paused:  # moving to another loop (judgehooks.lifespan): that loop retries it
                    self._queue.appendleft((job, ctx, False))
                    return
                if self._down_since is None:
                    self._down_since = time.monotonic()
                    log.warning("broker_unavailable", broker=redacted(self.broker_url), error_type=type(exc).__name__,
                                error=str(exc), note="jobs wait in the outbox; publishing is retried")
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)
        if self._down_since is not None:
            log.info("broker_recovered", broker=redacted(self.broker_url),
                     down_s=round(time.monotonic() - self._down_since, 3))
            self._down_since = None
        with self._lock:
            self.counters.done += 1
        self._enqueue_write(None, job.id)  # Redis has it: the outbox row can go

    def reset_after_fork(self) -> None:
        super().reset_after_fork()
        self._broker = None  # its connections belong to the parent

    def stats(self) -> dict[str, Any]:
        stats = super().stats()
        stats.update(broker=redacted(self.broker_url), forwarded=stats["done"],
                     broker_down=self._down_since is not None)
        return stats
