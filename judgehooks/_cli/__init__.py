"""The `judgehooks` command: report, tail, grade, resume; one module per subcommand."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from ..stores._url import store_from_url as from_url
from .common import CommandError
from .terminal import PrintableFormatter, hide, say

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# Subcommand -> module with `add_arguments(parser)` and `run(args) -> int`; its docstring's first line is the help.
COMMANDS: dict[str, str] = {
    "report": "judgehooks._cli.report",
    "tail": "judgehooks._cli.tail",
    "grade": "judgehooks._cli.grade",
    "resume": "judgehooks._cli.resume",
    "grade-sessions": "judgehooks._cli.sessions",
    "worker": "judgehooks._cli.worker",
    "label": "judgehooks._cli.label",
    "review": "judgehooks._cli.review",
    "calibrate": "judgehooks._cli.calibrate",
    "export": "judgehooks._cli.export",
    "consistency": "judgehooks._cli.consistency",
    "doctor": "judgehooks._cli.doctor",
    "ui": "judgehooks._cli.ui",
    "optimize": "judgehooks._cli.optimize",
}


def store_from_url(url: str) -> Any:
    """`judgehooks.stores.store_from_url`, for scripts: a bad URL or a missing extra exits with the reason."""
    try:
        return from_url(url)
    except (ValueError, ImportError) as exc:
        raise SystemExit(f"judgehooks: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="judgehooks", description="Grade agno runs with LLM judges, and read "
                                     "the verdicts back. Every command takes --store URL (or $JUDGEHOOKS_DB).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        summary = module.__doc__.strip().splitlines()[0] if module.__doc__ else None
        command = sub.add_parser(name, help=summary, description=summary)
        module.add_arguments(command)
        command.set_defaults(func=module.run, command_parser=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, unknown = build_parser().parse_known_args(argv)
    hide(_urls(sys.argv[1:] if argv is None else argv))
    _second_interrupt_leaves(0 if args.command in ("tail", "ui") else 130)
    if unknown:  # argparse would print the top-level usage; the subcommand's own says what it takes
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    # The command is the application here: library warnings (store retries, lost writes) go to stderr.
    # Their text may quote records and jobs: made printable like everything else the command prints.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PrintableFormatter("judgehooks: %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        code: int = args.func(args)  # the command's run(args)
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
