"""JSON Lines files people wrote (cases, golden sets, canaries): one JSON value a line, each line
bounded, each bad line named by its file and number. The file may come from anyone: nothing in it
is trusted beyond being read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

#: the longest line read, in bytes
MAX_LINE_BYTES = 16 * 1024 * 1024


def json_lines(path: str | os.PathLike[str], *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line; ValueError names the first line that is too
    long or not JSON; OSError when the file cannot be read."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if len(raw) > max_line_bytes:
                raise ValueError(f"{os.fspath(path)}:{number}: longer than {max_line_bytes} bytes")
            text = raw.decode("utf-8", errors="replace").strip()
            if not text:
                continue
            try:
                value = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise ValueError(f"{os.fspath(path)}:{number}: not JSON ({exc})") from None
            yield number, value
