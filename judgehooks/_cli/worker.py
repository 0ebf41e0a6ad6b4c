"""Grade the jobs that hooks with broker= publish to Redis (distributed grading).

    judgehooks worker --broker redis://127.0.0.1:6379/0 --store sqlite:///evals.db [--import myapp.evals]

SIGTERM or SIGINT: stop taking jobs, let running ones finish for --shutdown-timeout seconds, leave
the rest unacked for another worker, exit 0. A second signal exits at once.
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
from collections.abc import Callable
from typing import Any

from .._evaluators.base import Evaluator
from .._evaluators.spec import rebuild
from .._grading.redis import check_url, redacted, require_extra
from .._runtime import runtime
from .common import CommandError, add_store_argument, store_at
from .terminal import say


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker", default=os.environ.get("JUDGEHOOKS_BROKER"),
                        help="Redis URL, e.g. redis://127.0.0.1:6379/0; default $JUDGEHOOKS_BROKER")

    add_store_argument(parser)
    parser.add_argument("--import", dest="import_", action="append", metavar="MODULE",
                        help="import MODULE and grade with the judgehooks evaluators it defines at module level "
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
    parser.add_argument("--requests-per-minute", type=float, metavar="N",
                        help="judge calls per minute per judge model, shared by every worker on this Redis, for "
                             "evaluators that set no requests_per_minute of their own (default: no limit)")
    parser.add_argument("--max-deliveries", type=int, default=5, metavar="N",
                        help="a job delivered N times that no worker finished (it kills them) goes to the "
                             "dead-letter stream judgehooks:grading:dead, with an error record (default 5)")


def _imported_evaluators(modules: list[str]) -> dict[str, Any]:
    """Every judgehooks evaluator bound to a module-level name in `modules`, by evaluator name."""
    found: dict[str, Any] = {}
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise CommandError(f"worker: --import {name}: {type(exc).__name__}: {exc}", code=2) from None
        evaluators = [v for v in vars(module).values() if isinstance(v, Evaluator)]
        if not evaluators:
            raise CommandError(f"worker: --import {name}: the module defines no judgehooks evaluator at module level",
                               code=2)
        found.update((ev.evaluator_name, ev) for ev in evaluators)
    return found


def _check(args: argparse.Namespace) -> str | None:
    if not args.broker:
        return "--broker is required (or set $JUDGEHOOKS_BROKER), e.g. --broker redis://127.0.0.1:6379/0"
    try:
        check_url(args.broker, "--broker")
    except ValueError as exc:
        return str(exc)
    for option, value, minimum in (("--concurrency", args.concurrency, 1), ("--reclaim-after", args.reclaim_after, 1),
                                   ("--max-deliveries", args.max_deliveries, 1),
                                   ("--shutdown-timeout", args.shutdown_timeout, 0)):
        if value < minimum:
            return f"{option} must be >= {minimum}, got {value}"
    if args.requests_per_minute is not None and not args.requests_per_minute > 0:
        return f"--requests-per-minute must be > 0, got {args.requests_per_minute}"
    return None


def run(args: argparse.Namespace) -> int:
    """Run one worker until SIGTERM / SIGINT. Exit code 0 after a stop, 1 when Redis cannot be reached
    at start, 2 on bad arguments."""

    problem = _check(args)
    if problem is not None:
        raise CommandError(f"worker: {problem}", code=2)

    require_extra("judgehooks worker")
    from redis.exceptions import ConnectionError as RedisConnectionError

    from .._grading.redis.worker import Worker

    store = store_at(args.store, must_exist=False)
    worker = Worker(args.broker, store, concurrency=args.concurrency, reclaim_after=args.reclaim_after,
                    shutdown_timeout=args.shutdown_timeout, evaluators=_imported_evaluators(args.import_ or []),
                    consumer_name=args.name, rebuild=None if args.imported_only else rebuild,
                    requests_per_minute=args.requests_per_minute, max_deliveries=args.max_deliveries)
    # The worker runs on the judgehooks loop, like every store and judge here; this thread waits and
    # takes the signals.
    portal = runtime.portal()
    loop, stop = portal.call(_loop_and_event)

    def summary() -> str:
        return (f"judgehooks worker {worker.consumer_name}: stopped; {worker.counts['graded']} graded, "
                f"{worker.broker.reclaimed} reclaimed from dead workers, {worker.broker.dead_lettered} dead-lettered")

    restore = _handle_signals(lambda: loop.call_soon_threadsafe(stop.set), worker.shutdown_timeout, summary)

    def ready() -> None:
        say(f"judgehooks worker {worker.consumer_name}: grading from {redacted(args.broker)} into "
            f"{args.store or 'the default store'} (concurrency {args.concurrency})")

    try:
        portal.call(worker.serve, stop, ready)
    except (RedisConnectionError, OSError) as exc:
        raise CommandError(f"worker: cannot reach Redis at {redacted(args.broker)}: {exc}") from None
    finally:
        restore()
    say(summary())
    return 0


async def _loop_and_event() -> tuple[asyncio.AbstractEventLoop, asyncio.Event]:
    return asyncio.get_running_loop(), asyncio.Event()


def _handle_signals(stop: Callable[[], Any], shutdown_timeout: float,
                    summary: Callable[[], str]) -> Callable[[], None]:
    """SIGTERM / SIGINT: stop taking jobs (a second one: leave now); SIGUSR1: dump every thread's stack.
    Returns what puts the previous handlers back."""
    faulthandler.register(signal.SIGUSR1, file=sys.__stderr__ or sys.stderr, all_threads=True)
    stopping = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if stopping.is_set():
            _leave(f"second {signal.Signals(signum).name}", summary)
        stopping.set()
        _exit_after(shutdown_timeout + 15, summary)
        stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        faulthandler.unregister(signal.SIGUSR1)

    return restore


def _exit_after(seconds: float, summary: Callable[[], str]) -> None:
    """The last resort against a hung shutdown (e.g. a judge call stuck in a library's worker thread,
    which interpreter exit would wait for): leave after `seconds`."""
    timer = threading.Timer(seconds, _leave, args=(f"still stopping after {seconds:g}s", summary))
    timer.daemon = True
    timer.start()


def _leave(why: str, summary: Callable[[], str]) -> None:
    """Exit now. Nothing is lost: a job is acked only once its record is stored, so whatever is
    unfinished stays pending and another worker reclaims it."""
    say(f"judgehooks worker: {why}; exiting now (unfinished jobs stay unacked for other workers)", file=sys.stderr)
    say(summary())  # the same last line as a clean stop, for operators and scripts
    os._exit(0)
