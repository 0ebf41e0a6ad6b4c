"""The `judgehooks` command: report, tail, grade, resume; one module per subcommand.

The options of every command live in `options`, which imports nothing heavy: `--help` and
`--version` answer without agno, litellm or the stores. The module that runs a command is imported
only once its options parsed (`options.COMMANDS`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from importlib import metadata

from .options import COMMANDS, CommandError, respell, summary
from .terminal import PrintableFormatter, hide, say

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def version() -> str:
    """The installed judgehooks' version, from its package metadata (importing nothing of it)."""
    try:
        return metadata.version("judgehooks")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="judgehooks", description="Grade agno runs with LLM judges, and read "
                                     "the verdicts back. Every command takes --store URL (or $JUDGEHOOKS_DB).")
    parser.add_argument("--version", action="version", version=f"judgehooks {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (add_options, module) in COMMANDS.items():
        command = sub.add_parser(name, help=summary(name), description=summary(name))
        add_options(command)
        command.set_defaults(module=module, command_parser=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    args, unknown = build_parser().parse_known_args(respell(given))
    hide(_urls(given))
    _second_interrupt_leaves(0 if args.command in ("tail", "ui") else 130)
    if unknown:  # argparse would print the top-level usage; the subcommand's own says what it takes
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    # The command is the application here: library warnings (store retries, lost writes) go to stderr.
    # Their text may quote records and jobs: made printable like everything else the command prints.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PrintableFormatter("judgehooks: %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        code: int = importlib.import_module(args.module).run(args)  # the command's run(args)
        return code
    except CommandError as exc:
        say(f"judgehooks: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        say("judgehooks: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `judgehooks report | head`: the reader left; exit quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _second_interrupt_leaves(code: int) -> None:
    """Ctrl-C once stops the command as always (KeyboardInterrupt: a clean stop). Ctrl-C again, e.g.
    while the process shuts its judgehooks loop down at exit, leaves at once with `code` instead of
    printing a traceback from wherever it landed: what a command keeps is durable by then. Only where
    Ctrl-C interrupts anyway: a process started with SIGINT ignored (`nohup`, `cmd &`) keeps it so."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    interrupted = threading.Event()

    def on_interrupt(signum: int, frame: object) -> None:
        if not interrupted.is_set():
            interrupted.set()
            raise KeyboardInterrupt
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a closed pipe: nothing more to say
                pass
        os._exit(code)

    signal.signal(signal.SIGINT, on_interrupt)


#: environment variables holding URLs the commands connect to
_URL_VARIABLES = ("JUDGEHOOKS_DB", "JUDGEHOOKS_BROKER")


def _urls(argv: Sequence[str]) -> list[str]:
    """The store, broker and db URLs this command was given (options and environment): their
    passwords are never printed, whatever error quotes them."""
    values = [token.split("=", 1)[1] if token.startswith("--") and "=" in token else token for token in argv]
    values += [os.environ.get(name, "") for name in _URL_VARIABLES]
    return [v for v in values if "://" in v or "password" in v.lower()]


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
