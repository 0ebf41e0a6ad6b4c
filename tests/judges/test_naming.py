"""A judge's name for a failure mode (`naming.read_name`), read from a hostile reply."""

from __future__ import annotations

from judgehooks._judges.naming import read_name


def test_a_reply_of_a_million_blank_lines_is_read_in_one_pass():
    """Each line's start matched blank space across the lines after it: a namer's reply of newlines
    (1 MB, well within max_reply_bytes) took the event loop time growing with the square of its
    length (2.6 s at 80 KB, minutes here)."""
    assert read_name(" \n" * 500_000 + "NAME: Wrong refund window\n") == "Wrong refund window"
    assert read_name("\n" * 1_000_000) is None
