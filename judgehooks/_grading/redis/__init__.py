"""Distributed grading: hooks publish jobs to a Redis stream (taskiq + taskiq-redis), and
`judgehooks worker` processes grade them. Needs the `redis` extra: pip install 'judgehooks[redis]'.

This module stays import-light: taskiq and redis load only when a broker is used."""

from __future__ import annotations

import time
from typing import Any

from ..._base.log import log
from ..._base.urls import redact
from ..budget import DEFAULT_MAX_QUEUE_BYTES

URL_SCHEMES = ("redis://", "rediss://", "unix://")
#: the most bytes one Redis entry may hold (a job's taskiq message, a session turn): a producer
#: writes none larger, and a worker refuses a larger one as `too_large` before it checks a
#: signature or decodes a byte, so a planted entry of hundreds of MB costs one read, and the 32
#: entries a worker holds by default (its concurrency) stay within 2 GiB. It is the default
#: `max_queue_bytes`, the largest context a background queue takes by default: far past what any
#: judge model reads (a few MB of text). The job a producer cannot publish is one `error` record.
MAX_ENTRY_BYTES = DEFAULT_MAX_QUEUE_BYTES


def check_url(url: Any, parameter: str = "broker") -> str:
    """The broker URL, refused unless it is a Redis URL (no connection is made here)."""
    if not isinstance(url, str) or not url.startswith(URL_SCHEMES):
        raise ValueError(f"{parameter} must be a Redis URL such as 'redis://127.0.0.1:6379/0' "
                         f"({', '.join(URL_SCHEMES)}), got {url!r}")
    return url


#: the URL with its password hidden (`:password@`, and `?password=`, which redis-py takes too),
#: for logs, stats and messages
redacted = redact


def too_large(size: int) -> str | None:
    """What is wrong with an entry of `size` bytes (its size and the cap), or None when it fits."""
    if size <= MAX_ENTRY_BYTES:
        return None
    return f"{size} bytes, past the cap of {MAX_ENTRY_BYTES} bytes on one Redis entry (MAX_ENTRY_BYTES)"


def text(value: Any) -> str:
    """A value from Redis as text (bytes decoded, undecodable bytes replaced)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Outage:
    """A producer's Redis outage, said once when it starts (`broker_unavailable`) and once when it ends."""

    def __init__(self, url: str, note: str) -> None:
        self.url, self.note = url, note
        self.since: float | None = None  # monotonic time of the first failure, while Redis is away

    def down(self, exc: BaseException) -> None:
        if self.since is None:
            self.since = time.monotonic()
            log.warning("broker_unavailable", broker=redacted(self.url), error_type=type(exc).__name__,
                        error=str(exc), note=self.note)

    def up(self) -> None:
        if self.since is not None:
            log.info("broker_recovered", broker=redacted(self.url), down_s=round(time.monotonic() - self.since, 3))
            self.since = None


def require_extra(parameter: str = "broker") -> None:
    """A clear ImportError when taskiq / taskiq-redis are missing."""
    try:
        import taskiq  # noqa: F401
        import taskiq_redis  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"{parameter} needs taskiq and taskiq-redis: pip install 'judgehooks[redis]'") from exc
