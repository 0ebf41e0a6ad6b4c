"""A point in time as people write it: ``24h`` / ``30m`` / ``7d`` / ``2w`` / ``90s`` ago, or an ISO 8601
time. One reading for the command line (``--since 24h``) and for code (``store.query(since="24h")``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(value: str, *, now: datetime | None = None) -> datetime:
    """`value` as an aware datetime: a duration ago, or an ISO time (UTC when it has no offset).
    Raises ValueError saying which forms it takes, or that the time is out of range (a duration
    reaching back before the year 1, a time that is not one in UTC): never OverflowError."""
    match = _DURATION.match(value)
    if match:
        amount, unit = float(match.group(1)), match.group(2)
        try:
            return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
        except (OverflowError, ValueError):  # past timedelta's 999,999,999 days, or before the year 1
            raise ValueError(f"{value.strip()[:40]!r} reaches back before the year 1: give a shorter duration "
                             "(30m, 24h, 7d, 2w) or an ISO time (2026-11-30T08:00:00Z)") from None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{value!r} is neither a duration (30m, 24h, 7d, 2w) nor an ISO time (2026-11-30T08:00:00Z)") from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        moment.astimezone(UTC)  # stores compare times in UTC: one whose offset takes it past year 1 or 9999 is none
    except OverflowError:
        raise ValueError(f"{value.strip()!r} is out of range: in UTC it falls before 0001-01-01 or after "
                         "9999-12-31") from None
    return moment


def parse_duration(value: str) -> float:
    """A duration as people write it (``90s``, ``30m``, ``24h``, ``7d``, ``2w``), in seconds; ValueError
    says which forms it takes."""
    match = _DURATION.match(value) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"{value!r:.40} is not a duration: give a number and a unit (90s, 30m, 24h, 7d, 2w)")
    return float(timedelta(**{_UNITS[match.group(2)]: float(match.group(1))}).total_seconds())


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
