"""`judgehooks worker`: grade jobs that hooks with `broker=` published to Redis.

    judgehooks worker --broker redis://127.0.0.1:6379/0 --store sqlite:///evals.db [--import myapp.evals]

SIGTERM or SIGINT: stop taking jobs, let running ones finish for --shutdown-timeout seconds, leave
the rest unacked for another worker, exit 0. A second signal cancels at once.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import importlib
import os
import signal
import sys
import threading
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker", default=os.environ.get("JUDGEHOOKS_BROKER"),
                        help="Redis URL, e.g. redis://127.0.0.1:6379/0; default $JUDGEHOOKS_BROKER")
    parser.add_argument("--store", default=os.environ.get("JUDGEHOOKS_DB") or "judgehooks.db",
                        help="store URL or path (sqlite:///path/to.db); default $JUDGEHOOKS_DB or ./judgehooks.db")
    parser.add_argument("--import", dest="import_", action="append", metavar="MODULE",
                        help="import MODULE and grade with the AgentAsJudgeEval objects it defines at module level "
                             "(their judge and callbacks); others are rebuilt from the settings in each job")
    parser.add_argument("--concurrency", type=int, default=32, help="jobs graded at once (default 32)")
    parser.add_argument("--reclaim-after", type=float, default=30.0,
                        help="seconds a dead worker's job stays idle before a live worker takes it (default 30)")
    parser.add_argument("--shutdown-timeout", type=float, default=30.0,
                        help="on SIGTERM, seconds running jobs get to finish (default 30)")
    parser.add_argument("--imported-only", action="store_true",
                        help="grade only with --import'ed evaluators; never rebuild a judge from a job's settings "
                             "(a job names its model and api_base, and the worker's provider keys go with it)")
    parser.add_argument("--name", help="consumer name in the Redis group; default host:pid")


def _imported_evaluators(modules: list[str]) -> dict[str, Any]:
    from .._eval import AgentAsJudgeEval

    found: dict[str, Any] = {}
    for name in modules:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, AgentAsJudgeEval):
                found[value.evaluator] = value
    return found


def _check(args: argparse.Namespace) -> str | None:
    from . import check_url

    if not args.broker:
        return "--broker is required (or set $JUDGEHOOKS_BROKER), e.g. --broker redis://127.0.0.1:6379/0"
    try:
        check_url(args.broker, "--broker")
    except ValueError as exc:
        return str(exc)
    for option, value, minimum in (("--concurrency", args.concurrency, 1), ("--reclaim-after", args.reclaim_after, 1),
                                   ("--shutdown-timeout", args.shutdown_timeout, 0)):
        if value < minimum:
            return f"{option} must be >= {minimum}, got {value}"
    return None


def run(args: argparse.Namespace) -> int:
    """Run one worker until SIGTERM / SIGINT. Exit code 0 after a clean stop, 1 when Redis cannot be reached
    at start, 2 on bad arguments."""
    problem = _check(args)
    if problem is not None:
        print(f"judgehooks worker: {problem}", file=sys.stderr)
        return 2
    from .. import _cli
    from . import redacted, require_extra

    require_extra("judgehooks worker")
    from ._grader import Worker

    store = _cli.store_from_url(args.store)
    worker = Worker(args.broker, store, concurrency=args.concurrency, reclaim_after=args.reclaim_after,
                    shutdown_timeout=args.shutdown_timeout, evaluators=_imported_evaluators(args.import_ or []),
                    consumer_name=args.name, rebuild=not args.imported_only)
    from redis.exceptions import ConnectionError as RedisConnectionError

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 <pid>`: every thread's stack

    try:
        asyncio.run(_serve(worker, args))
    except (RedisConnectionError, OSError) as exc:
        print(f"judgehooks worker: cannot reach Redis at {redacted(args.broker)}: {exc}", file=sys.stderr)
        return 1
    print(f"judgehooks worker {worker.consumer_name}: stopped; {worker.counts['graded']} graded, "
          f"{worker.broker.reclaimed} reclaimed from dead workers", flush=True)
    return 0


async def _serve(worker: Any, args: argparse.Namespace) -> None:
    from . import redacted

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()

    def on_signal() -> None:
        if stop.is_set() and main is not None:
            main.cancel()  # a second signal: do not wait for running jobs
        else:
            _exit_after(worker.shutdown_timeout + 15)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    def ready() -> None:
        print(f"judgehooks worker {worker.consumer_name}: grading from {redacted(args.broker)} into "
              f"{args.store} (concurrency {args.concurrency})", flush=True)

    try:
        await worker.serve(stop, ready)
    except asyncio.CancelledError:
        pass


def _exit_after(seconds: float) -> None:
    """The last resort against a hung shutdown (e.g. a judge call stuck in a library's worker thread,
    which interpreter exit would wait for): leave after `seconds`. Nothing is lost: a job is acked
    only once its record is stored, so whatever is unfinished is reclaimed by another worker."""
    def leave() -> None:
        print(f"judgehooks worker: still stopping after {seconds:g}s; exiting now (unfinished jobs stay "
              "unacked for other workers)", file=sys.stderr, flush=True)
        os._exit(0)

    timer = threading.Timer(seconds, leave)
    timer.daemon = True
    timer.start()
