"""Text bound for a terminal. Records hold text from runs and judges: printed raw, an escape
sequence in a reason or a name could set the window title, clear the screen, recolour or hide what
follows, or reorder a line (bidi overrides). Everything a command prints goes through `say`."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from .._base.urls import passwords, redact

# C0 controls but newline, DEL, C1 controls (8-bit CSI/OSC), bidi marks, embeddings, overrides and
# isolates, line/paragraph separators, and lone surrogates (which cannot even be encoded).
_STEERING = "\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_IN_LINES = re.compile(f"[{_STEERING}]")
_IN_ONE_LINE = re.compile(f"[{_STEERING}\n]")


# (text, what is shown instead): the command line's URLs and their passwords, never printed as given.
_HIDDEN: list[tuple[str, str]] = []
#: a password shorter than this is hidden only inside its URL: masking every "abc" would garble the output
_SHORTEST_HIDDEN = 4


def hide(urls: Iterable[str]) -> None:
    """From now on, `printable` shows each of `urls` with its password as ***, and the password
    itself (wherever an error message quotes it) as ***. Set once per command by `main`."""
    hidden: dict[str, str] = {}
    for url in urls:
        if redact(url) != url:
            hidden[url] = redact(url)
            hidden.update((p, "***") for p in passwords(url) if len(p) >= _SHORTEST_HIDDEN)
    _HIDDEN[:] = sorted(hidden.items(), key=lambda item: len(item[0]), reverse=True)


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` with every character that could steer a terminal shown as a ``\\uXXXX`` escape (also
    newlines when `one_line`). The same escape is valid JSON, so JSON output stays parseable and
    decodes to the original text. Passwords the command was given are shown as *** (`hide`)."""
    for secret, shown in _HIDDEN:
        text = text.replace(secret, shown)
    return (_IN_ONE_LINE if one_line else _IN_LINES).sub(_escape, text)


def printable_strings(data: Any) -> Any:
    """JSON-like `data` with every string made `printable` on one line, for text rendering."""
    if isinstance(data, str):
        return printable(data, one_line=True)
    if isinstance(data, dict):
        return {key: printable_strings(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [printable_strings(value) for value in data]
    return data


def say(text: str = "", *, file: TextIO | None = None, one_line: bool = False) -> None:
    """Print `text` made `printable`, flushed (the one way a command writes to its terminal)."""
    print(printable(text, one_line=one_line), file=file if file is not None else sys.stdout, flush=True)


class PrintableFormatter(logging.Formatter):
    """Log lines on the command's stderr, made `printable` like everything else it prints."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))
