"""The dispatcher's one seam: what is done with a job once a worker takes it (grade it, or
publish it to Redis for `judgehooks worker` processes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .._base.context import EvalContext
from .._base.record import EvalRecord
from .outbox import Job


class Requeue(Exception):
    """Raised by a step that cannot finish its job on this loop (the dispatcher is moving): the
    job goes back to the front of the queue, and the next loop runs it."""


#: The dispatcher's one seam: what is done with a job once a worker takes it. It returns the
#: record to store (grading), or None when the job needs no record here (publishing to Redis);
#: `moving()` is true while the workers move to another loop. The default step grades.
Step = Callable[[Job, EvalContext, Callable[[], bool]], Awaitable[EvalRecord | None]]
