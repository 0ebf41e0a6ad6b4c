"""The producer side of distributed grading: the hook persists the job in the local outbox (as in
background mode), and the judgehooks loop hands it to the Redis stream; workers grade it.

Publishing is the background Dispatcher's step (instead of judging), which keeps every guarantee
the dispatcher has: the hook costs the outbox write and a hand-off, memory is bounded by
`max_queue`, shed jobs become `skipped` records, a crashed producer's jobs are forwarded by the next
process, and `drain()` waits until Redis has them all. While Redis is unreachable, jobs wait in the
outbox and publishing is retried with backoff; when the dispatcher moves to another loop
(`judgehooks.lifespan`) the job is handed back (`Requeue`) and that loop publishes it.
With ``$JUDGEHOOKS_JOB_KEY`` set, every job is signed (`signing`), so workers can refuse forged ones.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

import anyio
from redis.exceptions import RedisError
from taskiq.kicker import AsyncKicker

from ..._base.context import EvalContext, context_to_dict
from ..._base.log import log
from ..outbox import Job
from ..step import Requeue
from . import Outage, redacted
from .broker import TASK_NAME, JudgeStreamBroker
from .signing import JOB_KEY_ENV, job_key

_warned_unsigned = False


class Publisher:
    """The dispatcher step of distributed grading: "publish the job to Redis" instead of "judge"."""

    def __init__(self, broker_url: str, *, max_connections: int, key: str | bytes | None = None) -> None:
        global _warned_unsigned
        self.broker_url = broker_url
        self.max_connections = max_connections
        self.job_key = job_key(key)  # given, else $JUDGEHOOKS_JOB_KEY; refuses a key that is too short
        if self.job_key is None and not _warned_unsigned:
            _warned_unsigned = True
            log.warning("broker_jobs_unsigned", broker=redacted(broker_url),
                        note=f"set ${JOB_KEY_ENV} on producers and workers so workers can refuse forged jobs")
        self._broker: JudgeStreamBroker | None = None
        self._broker_loop: asyncio.AbstractEventLoop | None = None
        self._pid = os.getpid()
        self.outage = Outage(broker_url, "jobs wait in the outbox; publishing is retried")

    async def _connected(self) -> JudgeStreamBroker:
        loop = asyncio.get_running_loop()
        # Redis connections belong to one loop, and a forked child's to its parent
        if self._broker is None or self._broker_loop is not loop or self._pid != os.getpid():
            broker = JudgeStreamBroker(self.broker_url, max_connections=self.max_connections, job_key=self.job_key)
            await broker.startup()  # creates the stream and the workers' group, so no job predates it
            self._broker, self._broker_loop, self._pid = broker, loop, os.getpid()
        return self._broker

    async def step(self, job: Job, ctx: EvalContext, moving: Callable[[], bool]) -> None:
        """Publish one job (the fields the outbox keeps); it has no record here (a worker stores it),
        so the outbox row can go."""
        payload = json.dumps({"id": job.id, "evaluator": job.evaluator, "context": context_to_dict(ctx),
                              "sample_rate": job.sample_rate, "spec": job.spec, "created_at": job.created_at},
                             default=str, ensure_ascii=False)
        delay = 0.05
        while True:
            try:
                kicker: AsyncKicker[..., None] = AsyncKicker(TASK_NAME, await self._connected(), {})
                await kicker.kiq(job=payload)
                break
            except (RedisError, OSError) as exc:
                if moving():  # the dispatcher is moving to another loop: that loop retries it
                    raise Requeue from exc
                self.outage.down(exc)
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.outage.up()

    def describe(self, stats: dict[str, Any]) -> dict[str, Any]:
        """What `judgehooks.stats()` adds for a publishing dispatcher."""
        return {"broker": redacted(self.broker_url), "forwarded": stats["done"],
                "broker_down": self.outage.since is not None, "signed": self.job_key is not None}
