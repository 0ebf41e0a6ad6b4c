"""Background grading: a durable outbox, a bounded dispatcher, process-wide drain and stats."""

from ._dispatcher import OVERLOAD_POLICIES, Dispatcher
from ._outbox import Job, Outbox

__all__ = ("OVERLOAD_POLICIES", "Dispatcher", "Job", "Outbox")
