"""What a new text took verbatim from case data: its lines, links and e-mail addresses that appear in
the cases or in what the reflection model was shown of them (answers, reasons), and not in the
original text. A reflection model that obeys a line planted in a case (end-user text, by default)
copies it into the instructions it proposes; listing these in the result, and in the command's
output, puts them in front of whoever reviews the diff."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: shorter lines ("Be brief.") are too common to say anything when a case holds them too
MIN_LINE_CHARS = 12

_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>\"'`]+|\bwww\.[^\s<>\"'`]+", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_MARKER = re.compile(r"^(?:[-*•>]+|\d+[.)])\s*")  # a list item's or a quote's marker


def _items(text: str) -> list[str]:
    lines = [_MARKER.sub("", line.strip()).strip() for line in text.splitlines()]
    found = [line for line in lines if len(line) >= MIN_LINE_CHARS]
    found += [m.group().rstrip(".,;:!?)]}") for m in _URL.finditer(text)]
    found += [m.group().rstrip(".") for m in _EMAIL.finditer(text)]
    return found


def echoed(text: str, original: str, data: Iterable[str | None]) -> list[str]:
    """The lines, links and e-mail addresses of `text` that are not in `original` and appear verbatim
    in `data`, each once: the lines first, in order, then the links and the addresses."""
    corpus = "\n".join(d for d in data if d)
    seen: set[str] = set()
    found = []
    for item in _items(text):
        if item and item not in seen and item not in original and item in corpus:
            seen.add(item)
            found.append(item)
    return found
