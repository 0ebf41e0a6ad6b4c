"""The library's one logger. judgehooks never configures logging; the application does.

When the application has configured structlog, events go through its configuration. When it has
not, structlog's default would print every event to stdout, so events go instead to the stdlib
logger ``judgehooks`` as key=value lines: silent below WARNING until the application sets up
logging, like any well-behaved library. structlog itself (with rich, ~60 ms) is imported on the
first event, not by ``import judgehooks``.
"""

from __future__ import annotations

import logging
from typing import Any

_loggers: tuple[Any, Any] | None = None


def _build() -> tuple[Any, Any]:
    import structlog

    fallback = structlog.wrap_logger(
        logging.getLogger("judgehooks"),
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.stdlib.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
        ],
    )
    return structlog.get_logger("judgehooks"), fallback


class _Logger:
    """Routes each call to structlog's configuration if there is one, else to stdlib logging."""

    def __getattr__(self, name: str) -> Any:
        global _loggers
        if _loggers is None:
            _loggers = _build()
        import structlog

        configured, fallback = _loggers
        return getattr(configured if structlog.is_configured() else fallback, name)


log: Any = _Logger()
