"""Grade the jobs that hooks with broker= publish to Redis (distributed grading).

    judgehooks worker --broker redis://127.0.0.1:6379/0 --store sqlite:///evals.db --import myapp.evals

A worker grades only the evaluators it imports. `--rebuild CLASS,...` also rebuilds those classes
from a job's settings, with the worker's own judge (`--judge-model`, `--judge-api-base`), and needs
signed jobs ($JUDGEHOOKS_JOB_KEY): a job never chooses where the worker's provider key goes.

SIGTERM or SIGINT: stop taking jobs, let running ones finish for --shutdown-timeout seconds, leave
the rest unacked for another worker, exit 0. A second signal exits at once.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from .._evaluators.spec import JobRebuild
from .._grading.redis import check_url, redacted, require_extra
from .._grading.redis.signing import GENERATE, JOB_KEY_ENV, job_key
from .._runtime import runtime
from .common import import_module, module_evaluators, store_at
from .options import CommandError
from .terminal import say


def _imported_evaluators(modules: list[str]) -> dict[str, Any]:
    """Every judgehooks evaluator bound to a module-level name in `modules`, by evaluator name."""
    found: dict[str, Any] = {}
    for name in modules:
        evaluators = module_evaluators(import_module(name, "worker: --import"))
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
    if args.rebuild and args.imported_only:
        return "--rebuild and --imported-only contradict each other"
    return None


def _rebuild(args: argparse.Namespace, signed: bool) -> JobRebuild | None:
    """How this worker rebuilds evaluators from jobs (--rebuild), or None: imported evaluators only."""
    if not args.rebuild:
        return None
    if not signed:
        raise CommandError(f"worker: --rebuild lets a job choose an evaluator's settings, so it needs signed jobs: "
                           f"set ${JOB_KEY_ENV} (the same on producers and workers; generate one with {GENERATE})",
                           code=2)
    names = frozenset(n.strip() for value in args.rebuild for n in value.split(",") if n.strip())
    try:
        return JobRebuild(allow=names, model=args.judge_model, api_base=args.judge_api_base)
    except ValueError as exc:
        raise CommandError(f"worker: --rebuild: {exc}", code=2) from None


def run(args: argparse.Namespace) -> int:
    """Run one worker until SIGTERM / SIGINT. Exit code 0 after a stop, 1 when Redis cannot be reached
    at start, 2 on bad arguments."""

    problem = _check(args)
    if problem is not None:
        raise CommandError(f"worker: {problem}", code=2)

    require_extra("judgehooks worker")
    from redis.exceptions import ConnectionError as RedisConnectionError

    from .._grading.redis.worker import Worker

    try:
        signed = job_key() is not None
    except ValueError as exc:
        raise CommandError(f"worker: {exc}", code=2) from None
    rebuild = _rebuild(args, signed)
    evaluators = _imported_evaluators(args.import_ or [])
    store = store_at(args.store, must_exist=False)
    worker = Worker(args.broker, store, concurrency=args.concurrency, reclaim_after=args.reclaim_after,
                    shutdown_timeout=args.shutdown_timeout, evaluators=evaluators, consumer_name=args.name,
                    rebuild=rebuild, requests_per_minute=args.requests_per_minute,
                    max_deliveries=args.max_deliveries)
    # The worker runs on the judgehooks loop, like every store and judge here; this thread waits and
    # takes the signals.
    portal = runtime.portal()
    loop, stop = portal.call(_loop_and_event)

    def summary() -> str:
        stats = worker.stats()
        return (f"judgehooks worker {worker.consumer_name}: stopped; {stats['graded']} graded, "
                f"{stats['reclaimed']} reclaimed from dead workers, {stats['dead_lettered']} dead-lettered, "
                f"{stats['refused']} refused (kept in the {stats['refused_stream']} stream); "
                f"{stats['sessions_graded']} session(s) graded, {stats['sessions_taken_over']} taken over")

    restore = _handle_signals(lambda: loop.call_soon_threadsafe(stop.set), worker.shutdown_timeout, summary)

    def ready() -> None:
        rebuilds = f"; rebuilds {', '.join(sorted(rebuild.allow))} from jobs" if rebuild is not None else ""
        say(f"judgehooks worker {worker.consumer_name}: grading from {redacted(args.broker)} into "
              f"{args.store or 'the default store'} (concurrency {args.concurrency}; imported evaluators "
              f"{', '.join(sorted(evaluators)) or 'none'}{rebuilds})")
        if not signed:
            print(f"judgehooks worker: jobs are NOT authenticated: anyone who can write to this Redis can add "
                  f"records; set ${JOB_KEY_ENV} on producers and workers to refuse unsigned jobs",
                  file=sys.stderr, flush=True)

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
