"""Distributed grading: hooks publish jobs to a Redis stream (taskiq + taskiq-redis), and
`judgehooks worker` processes grade them. Needs the `redis` extra: pip install 'judgehooks[redis]'.

This module stays import-light: taskiq and redis load only when a broker is used."""

from __future__ import annotations

from typing import Any

URL_SCHEMES = ("redis://", "rediss://", "unix://")


def check_url(url: Any, parameter: str = "broker") -> str:
    """The broker URL, refused unless it is a Redis URL (no connection is made here)."""
    if not isinstance(url, str) or not url.startswith(URL_SCHEMES):
        raise ValueError(f"{parameter} must be a Redis URL such as 'redis://127.0.0.1:6379/0' "
                         f"({', '.join(URL_SCHEMES)}), got {url!r}")
    return url


def redacted(url: str) -> str:
    """The URL without its credentials, for logs, stats and messages."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.rpartition('@')[2]}" if "@" in rest else url


def text(value: Any) -> str:
    """A value from Redis as text (bytes decoded, undecodable bytes replaced)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def require_extra(parameter: str = "broker") -> None:
    """A clear ImportError when taskiq / taskiq-redis are missing."""
    try:
        import taskiq  # noqa: F401
        import taskiq_redis  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"{parameter} needs taskiq and taskiq-redis: pip install 'judgehooks[redis]'") from exc
