"""Feedback: what an end user of the agent said about one run (a thumb or a number, and a comment).

Not a reviewer's `Label` (a verdict on one stored record, the ground truth `calibrate()` measures
the judge against): feedback is about a run, may come before or without any verdict, and says
whether its user was pleased, not whether the criterion held. It is shown beside the verdicts and
never counted as a label.

One feedback per (run, user) when the user is named (changing one's mind replaces it); feedback
without a user is kept as given, each on its own.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .record import utcnow

#: the thumbs, and the `passed` each is kept as
THUMBS = {"up": True, "down": False}
#: where feedback comes from: the end user of the agent (a reviewer's verdict is a `Label`)
SOURCES = ("user",)
#: longest comment, run id and user id kept, in characters
MAX_COMMENT_CHARS = 2000
MAX_ID_CHARS = 200
_IDS = uuid.UUID("5b0c2f55-8d1e-4d5e-9a39-6c7e3f1b2a10")


def feedback_value(value: object) -> str | float:
    """`value` as feedback keeps it: ``"up"``, ``"down"`` or a finite float; ValueError naming the
    problem for anything else (another word, NaN, infinity, a bool, a non-number)."""
    if isinstance(value, str):
        if value in THUMBS:
            return value
        raise ValueError(f"value must be 'up', 'down' or a finite number, got the text {value[:40]!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "a bool: say 'up' or 'down'" if isinstance(value, bool) else type(value).__name__
        raise ValueError(f"value must be 'up', 'down' or a finite number, got {value!r:.40} ({kind})")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"value must be a finite number, got {value!r:.40}")
    return number


def check_text(name: str, value: object, limit: int, *, required: bool, blank: bool = False) -> None:
    """ValueError naming `name` unless `value` is text (not blank, unless `blank`) of at most
    `limit` characters without NUL, or None when not `required`."""
    if value is None and not required:
        return
    if not isinstance(value, str) or (not blank and not value.strip()):
        raise ValueError(f"{name} must be a non-empty string{'' if required else ' or None'}, got {value!r:.80}")
    if len(value) > limit:
        raise ValueError(f"{name} is longer than {limit} characters ({len(value)})")
    if "\x00" in value:  # PostgreSQL text cannot hold one
        raise ValueError(f"{name} holds a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in JSON): no store can write it
        raise ValueError(f"{name} is not Unicode text (it holds a lone surrogate)") from None


def feedback_id(run_id: str, user_id: str | None) -> str:
    """The id feedback is kept under: one per (run, user) for a named user, a fresh one otherwise."""
    return (uuid.uuid5(_IDS, f"{run_id}\x00{user_id}") if user_id is not None else uuid.uuid4()).hex


@dataclass(frozen=True, slots=True)
class Feedback:
    """An end user's ``value`` (``"up"``, ``"down"`` or a number) on the run ``run_id``."""

    run_id: str
    value: str | float
    comment: str | None = None
    user_id: str | None = None
    source: str = "user"
    id: str = ""
    created_at: datetime = field(default_factory=utcnow)

    def __post_init__(self) -> None:
        check_text("run_id", self.run_id, MAX_ID_CHARS, required=True)
        object.__setattr__(self, "value", feedback_value(self.value))
        check_text("comment", self.comment, MAX_COMMENT_CHARS, required=False, blank=True)
        check_text("user_id", self.user_id, MAX_ID_CHARS, required=False)
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {self.source!r:.40}")
        if not self.id:
            object.__setattr__(self, "id", feedback_id(self.run_id, self.user_id))
        check_text("id", self.id, MAX_ID_CHARS, required=True)
        if not isinstance(self.created_at, datetime) or self.created_at.tzinfo is None:
            raise ValueError(f"created_at must be a timezone-aware datetime, got {self.created_at!r:.80}")

    @property
    def passed(self) -> bool | None:
        """True for a thumb up, False for a thumb down, None for a number."""
        return THUMBS.get(self.value) if isinstance(self.value, str) else None

    @property
    def score(self) -> float | None:
        """The number given, or None for a thumb."""
        return None if isinstance(self.value, str) else self.value

    def data(self) -> dict[str, Any]:
        """The feedback as JSON data."""
        return {"id": self.id, "run_id": self.run_id, "value": self.value, "comment": self.comment,
                "user_id": self.user_id, "source": self.source,
                "created_at": self.created_at.astimezone(UTC).isoformat(timespec="microseconds")}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Feedback:
        """Feedback from `data` (as `data()` writes it); ValueError naming what is wrong."""
        created = data.get("created_at")
        when = datetime.fromisoformat(created) if isinstance(created, str) else created
        return cls(run_id=data.get("run_id"), value=data.get("value"),  # type: ignore[arg-type]
                   comment=data.get("comment"), user_id=data.get("user_id"), source=data.get("source", "user"),
                   id=data.get("id") or "", **({"created_at": when} if when is not None else {}))
