"""The log checks the level first: an event that will not be emitted is not scrubbed (nor is
structlog imported for it); an emitted one is scrubbed as before (tests/security/test_credentials.py)."""

from __future__ import annotations

import logging
import subprocess
import sys

import structlog
from structlog.testing import LogCapture

from judgehooks._base import log as log_module
from judgehooks._base.log import log

KEY = "sk-live-0123456789abcdef"


def _counting(monkeypatch) -> list[object]:
    seen: list[object] = []
    real = log_module.scrub_data

    def scrub(value: object) -> object:
        seen.append(value)
        return real(value)

    monkeypatch.setattr(log_module, "scrub_data", scrub)
    return seen


def test_an_event_below_a_filtering_loggers_level_is_not_scrubbed(monkeypatch):
    seen = _counting(monkeypatch)
    capture = LogCapture()
    structlog.configure(processors=[capture], wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        log.debug("below", url=f"https://u:{KEY}@x")
        assert seen == [] and capture.entries == []
        log.info("emitted", url=f"https://u:{KEY}@x")
    finally:
        structlog.reset_defaults()
    [entry] = capture.entries
    assert len(seen) == 1 and KEY not in repr(entry)


def test_unconfigured_an_event_below_the_stdlib_level_is_not_scrubbed(monkeypatch, caplog):
    seen = _counting(monkeypatch)
    structlog.reset_defaults()
    with caplog.at_level(logging.WARNING, logger="judgehooks"):
        log.info("below", url=f"https://u:{KEY}@x")
        assert seen == []
        log.warning("emitted", url=f"https://u:{KEY}@x")
    assert len(seen) == 1 and "emitted" in caplog.text and KEY not in caplog.text


def test_a_dropped_event_does_not_import_structlog():
    code = ("import sys; from judgehooks._base.log import log; log.info('below', x=1); log.debug('below');"
            "print('structlog' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
