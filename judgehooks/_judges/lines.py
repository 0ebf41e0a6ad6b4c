"""JSON lines over the pipes between the caller and its judge processes, moved in bulk.

A reader takes whatever the pipe holds (up to 64 KiB) and hands on every whole line in it at
once, so a reader thread wakes its event loop once per chunk, not once per line, and never reads
a byte at a time (what iterating an unbuffered pipe does). A writer gathers the lines one turn of
the event loop produces and writes them with one call.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

CHUNK = 1 << 16


def line_batches(fd: int) -> Iterator[list[bytes]]:
    """The lines (without their newline) arriving on `fd`, in batches as they come; a last line
    without a newline is the last batch. Ends when the pipe closes."""
    partial: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, CHUNK)
        except OSError:
            break
        if not chunk:
            break
        if b"\n" not in chunk:  # part of a long line
            partial.append(chunk)
            continue
        whole, _, rest = b"".join([*partial, chunk]).rpartition(b"\n")
        partial = [rest] if rest else []
        yield whole.split(b"\n")
    if partial:
        yield [b"".join(partial)]


def write_all(out: Any, data: bytes) -> None:
    """All of `data` into an unbuffered pipe (one raw write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[out.write(view) or 0:]
