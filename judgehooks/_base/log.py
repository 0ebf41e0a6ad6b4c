"""The library's one logger. judgehooks never configures logging; the application does.

When the application has configured structlog, events go through its configuration. When it has
not, structlog's default would print every event to stdout, so events go instead to the stdlib
logger ``judgehooks`` as key=value lines: silent below WARNING until the application sets up
logging, like any well-behaved library. structlog itself (with rich, ~60 ms) is imported on the
first event, not by ``import judgehooks``.

Every field of every event, and the traceback of ``log.exception``, goes through `secrets.scrub_data`
first: an error's text may quote an API key or a URL's password.
"""

from __future__ import annotations

import logging
import sys
import traceback
from typing import Any

from .secrets import scrub_data

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
        target = configured if structlog.is_configured() else fallback
        method = getattr(target, name)
        if name not in _LEVELS:
            return method
        return lambda event, *args, **fields: _call(target, name, event, args, fields)


_LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception"})


def _call(target: Any, name: str, event: str, args: tuple[Any, ...], fields: dict[str, Any]) -> Any:
    """One event with its fields scrubbed; an exception's traceback rendered here, scrubbed, as the
    ``exception`` field structlog's own `format_exc_info` would have made."""
    if name == "exception" or fields.pop("exc_info", None):
        found = sys.exc_info()
        if found[0] is not None:
            fields["exception"] = "".join(traceback.format_exception(*found))
        name = "error" if name == "exception" else name
    return getattr(target, name)(event, *args, **{k: scrub_data(v) for k, v in fields.items()})



log: Any = _Logger()
