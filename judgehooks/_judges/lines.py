"""JSON lines over the pipes between the caller and its judge processes, moved in bulk.

A reader takes whatever the pipe holds (up to 64 KiB) and hands on every whole line in it at
once, so a reader thread wakes its event loop once per chunk, not once per line, and never reads
a byte at a time (what iterating an unbuffered pipe does). A writer gathers the lines one turn of
the event loop produces and writes them with one call (a buffered writer's, which writes them all).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from pydantic_core import from_json, to_json

CHUNK = 1 << 16


def json_line(message: dict[str, Any]) -> bytes:
    """One message as a JSON line: pydantic-core's encoder (a quarter of `json.dumps`'s time on a
    prompt's kilobytes), or `json.dumps`'s escapes for text UTF-8 cannot carry (a lone surrogate),
    which the other end reads back as the same string."""
    try:
        return to_json(message) + b"\n"
    except ValueError:
        return (json.dumps(message) + "\n").encode()


def read_json_line(raw: bytes) -> Any:
    """A `json_line` read back: pydantic-core's parser (a third of `json.loads`'s time), or
    `json.loads` for what it refuses, such as the escape of a lone surrogate. Raises ValueError
    for a line that is not JSON."""
    try:
        return from_json(raw)
    except ValueError:
        try:
            return json.loads(raw)
        except RecursionError as exc:  # nested deeper than Python's stack: no line of ours
            raise ValueError("JSON nested too deep") from exc


class LineSplitter:
    """Whole lines out of chunks as they arrive: `feed` returns the lines (without their newline)
    that a chunk completes; `rest` is a last line that never got its newline."""

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        if b"\n" not in chunk:  # part of a long line
            self._partial.append(chunk)
            return []
        if self._partial:
            chunk = b"".join([*self._partial, chunk])
        whole, _, rest = chunk.rpartition(b"\n")
        self._partial = [rest] if rest else []
        return whole.split(b"\n")

    def rest(self) -> list[bytes]:
        return [b"".join(self._partial)] if self._partial else []


def read_chunk(fd: int) -> bytes:
    """What the pipe holds, up to `CHUNK` bytes (blocking until it holds some); b"" once it is closed."""
    try:
        return os.read(fd, CHUNK)
    except OSError:
        return b""


def line_batches(fd: int) -> Iterator[list[bytes]]:
    """The lines (without their newline) arriving on `fd`, in batches as they come; a last line
    without a newline is the last batch. Ends when the pipe closes."""
    lines = LineSplitter()
    while chunk := read_chunk(fd):
        if batch := lines.feed(chunk):
            yield batch
    if rest := lines.rest():
        yield rest
