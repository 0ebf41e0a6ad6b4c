"""The library's one logger. judgehooks never configures logging; the application does."""

from __future__ import annotations

import structlog

log = structlog.get_logger("judgehooks")
