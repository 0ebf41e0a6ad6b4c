"""The producer side of distributed grading: the hook persists the job in the local outbox (as in
background mode), and the judgehooks loop hands it to the Redis stream; workers grade it.

Publishing is the background Dispatcher's step (instead of judging), which keeps every guarantee
the dispatcher has: the hook costs the outbox write and a hand-off, memory is bounded by
`max_queue`, shed jobs become `skipped` records, a crashed producer's jobs are forwarded by the next
process, and `drain()` waits until Redis has them all. While Redis is unreachable, jobs wait in the
outbox and publishing is retried with backoff; when the dispatcher moves to another loop
(`judgehooks.lifespan`) the job is handed back (`Requeue`) and that loop publishes it.
With ``$JUDGEHOOKS_JOB_KEY`` set, every job is signed (`signing`), so workers can refuse forged ones.
A job past `MAX_ENTRY_BYTES`, which every worker would refuse, is never published: the step returns
its `error` record, which the dispatcher stores as it stores a graded job's.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

import anyio
from redis.exceptions import RedisError

from ..._base.context import EvalContext, context_to_dict
from ..._base.log import log
from ..._base.outcome import Outcome
from ..._base.record import EvalRecord
from ...exceptions import EvaluatorError
from ..outbox import Job
from ..pipeline import Graded, make_record
from ..step import Requeue
from . import Outage, redacted, too_large
from .broker import JudgeStreamBroker
from .signing import JOB_KEY_ENV, job_key

_warned_unsigned = False


class Publisher:
    """The dispatcher step of distributed grading: "publish the job to Redis" instead of "judge"."""

    def __init__(self, broker_url: str, evaluator: Graded, *, max_connections: int,
                 key: str | bytes | None = None) -> None:
        global _warned_unsigned
        self.broker_url = broker_url
        self.evaluator = evaluator  # whose `error` record a job too large to publish gets
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

    async def step(self, job: Job, ctx: EvalContext, moving: Callable[[], bool]) -> EvalRecord | None:
        """Publish one job (the fields the outbox keeps); it has no record here (a worker stores it),
        so the outbox row can go. A job too large for any worker is its `error` record instead."""
        payload = json.dumps({"id": job.id, "evaluator": job.evaluator, "context": context_to_dict(ctx),
                              "sample_rate": job.sample_rate, "spec": job.spec, "created_at": job.created_at},
                             default=str, ensure_ascii=False)
        delay = 0.05
        while True:
            try:
                broker = await self._connected()
                message = broker.job(payload)  # measured as a worker measures it: the bytes it reads
                why = too_large(len(message.message))
                if why is None:
                    await broker.kick(message)  # not taskiq's kiq, which hides a RedisError in a SendTaskError
                break
            except (RedisError, OSError) as exc:
                if moving():  # the dispatcher is moving to another loop: that loop retries it
                    raise Requeue from exc
                self.outage.down(exc)
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.outage.up()
        return None if why is None else self._unpublished(job, ctx, why)

    def _unpublished(self, job: Job, ctx: EvalContext, why: str) -> EvalRecord:
        """The `error` record of a job no worker would take: the run's one record, saying why and what to do."""
        error = EvaluatorError(f"the job is {why}, so it was not published: every worker would refuse it. "
                               "Shorten the run's text before it is graded (redact=), or grade this evaluator "
                               "in this process (without broker=)")
        return make_record(ctx, self.evaluator, Outcome(error=error), latency_ms=0.0, sample_rate=job.sample_rate)

    def describe(self, stats: dict[str, Any]) -> dict[str, Any]:
        """What `judgehooks.stats()` adds for a publishing dispatcher."""
        # a publishing dispatcher's only `error` records are jobs too large to publish
        return {"broker": redacted(self.broker_url), "forwarded": stats["done"] - stats["errors"],
                "broker_down": self.outage.since is not None, "signed": self.job_key is not None}
