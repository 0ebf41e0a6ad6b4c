"""A point in time as people write it: ``24h`` / ``30m`` / ``7d`` / ``2w`` / ``90s`` ago, or an ISO 8601
time. One reading for the command line (``--since 24h``) and for code (``store.query(since="24h")``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(value: str, *, now: datetime | None = None) -> datetime:
    """`value` as an aware datetime: a duration ago, or an ISO time (UTC when it has no offset).
    Raises ValueError saying which forms it takes."""
    match = _DURATION.match(value)
    if match:
        amount, unit = float(match.group(1)), match.group(2)
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{value!r} is neither a duration (30m, 24h, 7d, 2w) nor an ISO time (2026-11-30T08:00:00Z)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def as_moment(name: str, value: datetime | str | None) -> datetime | None:
    """A query bound (`since`, `until`) as a datetime: a datetime as given, text through `parse_when`."""
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return parse_when(value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    raise TypeError(f"{name} must be a datetime or text such as '24h' or an ISO time, got {type(value).__name__}")
