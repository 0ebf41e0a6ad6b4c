"""The library's one logger. judgehooks never configures logging; the application does.

Events go through the application's structlog configuration when it has one. Otherwise (structlog's
default would print every event to stdout) they go to the stdlib logger ``judgehooks`` as key=value
lines: silent below WARNING until the application sets up logging. structlog itself (with rich,
~60 ms) is imported on the first event, not by ``import judgehooks``.

Every field of every event that will be emitted, and the traceback of ``log.exception``, goes
through `secrets.scrub_data` first: an error's text may quote an API key or a URL's password. The
level is checked before that work and before structlog is imported: an event below the stdlib
logger's level, or one a filtering bound logger (`make_filtering_bound_logger`) drops, costs one check.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable
from typing import Any

from .secrets import scrub_data

_loggers: tuple[Any, Any] | None = None
_stdlib = logging.getLogger("judgehooks")
_LEVELNO = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
            "critical": logging.CRITICAL, "exception": logging.ERROR}


def _build() -> tuple[Any, Any]:
    import structlog

    fallback = structlog.wrap_logger(
        _stdlib,
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


def _method(name: str) -> Callable[..., Any]:
    def method(self: _Logger, event: str, *args: Any, **fields: Any) -> Any:
        return _call(name, event, args, fields)

    return method


class _Logger:
    """Routes each call to structlog's configuration if there is one, else to stdlib logging."""

    debug, info, warning, error, critical, exception = map(
        _method, ("debug", "info", "warning", "error", "critical", "exception"))
    warn = warning

    def __getattr__(self, name: str) -> Any:  # bind, new, ...: the target's own
        return getattr(_target(), name)


def _target() -> Any:
    """structlog's configured logger when the application configured structlog, else the fallback."""
    global _loggers
    structlog = sys.modules.get("structlog")  # an application that configured structlog imported it
    if _loggers is None:
        _loggers = _build()
    return _loggers[0] if structlog is not None and structlog.is_configured() else _loggers[1]


def _dropped(structlog: Any, method: Any) -> bool:
    """True for a filtering bound logger's method for a level below its minimum (a no-op)."""
    native = getattr(structlog, "_native", None)
    return getattr(method, "__func__", None) in (getattr(native, "_nop", None), getattr(native, "_anop", None))


def _call(name: str, event: str, args: tuple[Any, ...], fields: dict[str, Any]) -> Any:
    """One event, if it will be emitted, with its fields scrubbed; an exception's traceback rendered
    here, scrubbed, as the ``exception`` field structlog's own `format_exc_info` would have made."""
    structlog = sys.modules.get("structlog")
    configured = structlog is not None and structlog.is_configured()
    if not configured and not _stdlib.isEnabledFor(_LEVELNO[name]):
        return None  # below the level: no scrubbing, no structlog import
    method = getattr(_target(), "error" if name == "exception" else name)
    if configured and _dropped(structlog, method):
        return None
    if name == "exception" or fields.pop("exc_info", None):
        found = sys.exc_info()
        if found[0] is not None:
            fields["exception"] = "".join(traceback.format_exception(*found))
    return method(event, *args, **{k: scrub_data(v) for k, v in fields.items()})


log: Any = _Logger()
