"""Run the `judgehooks` command in this process, the way click's and httpx's test runners do.

A subprocess pays seconds of interpreter start and imports per call; the command is
`judgehooks._cli.main(argv)`, so the tests call it directly with its own stdin, stdout, stderr,
environment and working directory, and read back what a terminal would have shown. What only a
real process shows (the console script, signals, a fresh interpreter's imports) is tested in
`tests/e2e/` with real processes.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CliResult:
    """What `subprocess.run(..., capture_output=True, text=True)` gives: the exit code and the text."""
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def _stream() -> io.TextIOWrapper:
    # A binary buffer underneath, like a real pipe, for commands that write bytes to sys.stdout.buffer.
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    # Decoded as subprocess.run(text=True) decodes a pipe: UTF-8, universal newlines.
    stream.flush()
    data = stream.buffer.getvalue()  # type: ignore[attr-defined]
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()


def run_cli(*args: str | os.PathLike[str], stdin: str | None = None, cwd: str | os.PathLike[str] | None = None,
            env: Mapping[str, str | None] | None = None) -> CliResult:
    """`judgehooks ARGS...` in-process: ``env`` sets (or, with None, removes) variables for the call."""
    from judgehooks._cli import main

    argv = tuple(str(a) for a in args)
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    root = logging.getLogger()
    saved_logging = root.handlers[:], root.level
    saved_sigint = signal.getsignal(signal.SIGINT)  # main() makes a second Ctrl-C leave the process at once
    out, err = _stream(), _stream()
    try:
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if cwd is not None:
            os.chdir(Path(cwd))
        sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
        sys.stdout, sys.stderr = out, err
        root.handlers = []  # main() installs its own stderr handler, as in a fresh process
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's usage errors, and commands that exit with a message
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        if saved_sigint is not None and signal.getsignal(signal.SIGINT) is not saved_sigint:
            signal.signal(signal.SIGINT, saved_sigint)
        root.handlers, level = saved_logging
        root.setLevel(level)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return CliResult(argv, int(code), _text(out), _text(err))
