"""The `judgehooks` command."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def store_from_url(url: str) -> Any:
    """A store from a URL or a path: sqlite:///path/to.db, memory://, or a plain file path."""
    from .stores import MemoryStore, SQLiteStore

    if url.startswith("sqlite:///"):
        return SQLiteStore(url[len("sqlite:///"):] or "judgehooks.db")
    if url.startswith("sqlite://"):
        return SQLiteStore(url[len("sqlite://"):] or "judgehooks.db")
    if url == "memory://":
        return MemoryStore()
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise SystemExit(f"judgehooks: unsupported store URL scheme {scheme!r} in {url!r} "
                         "(supported: sqlite:///path, memory://, or a file path)")
    return SQLiteStore(url)


def _pending_specs(outbox_path: str) -> dict[str, dict[str, Any] | None]:
    conn = sqlite3.connect(outbox_path)
    try:
        rows = conn.execute("SELECT evaluator, spec FROM eval_jobs GROUP BY evaluator").fetchall()
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()
    return {name: (json.loads(spec) if spec else None) for name, spec in rows}


def rebuild(spec: dict[str, Any] | None, **hook: Any) -> Any:
    """An evaluator from the spec its process stored with its jobs: AgentAsJudgeEval settings, or
    {"class": <a judgehooks evaluator>, "settings": {...}}. Evaluators made from user code (functions,
    pydantic models, composites, custom judges) store no spec: they need --import."""
    import judgehooks

    if spec is None:
        raise ValueError("it was built from user code (a function, a model, a composite or a custom judge)")
    settings = dict(spec.get("settings") or {}) if "class" in spec else dict(spec)
    if "class" in spec:
        cls = getattr(judgehooks, spec["class"], None)
        if not (isinstance(cls, type) and issubclass(cls, judgehooks.Evaluator)):
            raise ValueError(f"its spec names {spec['class']!r}, which is not a judgehooks evaluator")
    else:
        cls = judgehooks.AgentAsJudgeEval
        if not spec.get("model"):
            raise ValueError("its judge is not a litellm model string")
    settings = {k: v for k, v in settings.items() if v is not None}
    return cls(**settings, **hook, run_in_background=True)


def cmd_resume(args: argparse.Namespace) -> int:
    """Grade the jobs that processes left in the outbox when they died or timed out at exit."""
    import judgehooks
    from judgehooks.dispatch._dispatcher import _registry
    from judgehooks.stores._sqlite import outbox_path_for

    store = store_from_url(args.store)
    outbox = args.outbox or outbox_path_for(store)
    if not os.path.exists(outbox):
        print(f"judgehooks resume: no outbox at {outbox!r}: nothing pending")
        return 0
    for module in args.import_ or ():
        importlib.import_module(module)  # its evaluators start dispatchers that claim their own jobs
    known = {d.pipeline.name for d in _registry.all()}
    specs = _pending_specs(outbox)
    evaluators = []
    for name, spec in specs.items():
        if name in known:
            continue
        try:
            evaluators.append(rebuild(spec, store=store, outbox=outbox, max_concurrency=args.concurrency))
        except ValueError as exc:
            print(f"judgehooks resume: evaluator {name!r} has pending jobs but {exc}; pass --import MODULE with "
                  f"the module that constructs it (its evaluators then grade their own jobs)", file=sys.stderr)
    if not specs:
        print("judgehooks resume: nothing pending")
        return 0
    finished = judgehooks.drain(args.timeout)
    stats = judgehooks.stats()
    resumed = sum(s["resumed"] for s in stats.values())
    done = sum(s["done"] for s in stats.values())
    print(f"judgehooks resume: claimed {resumed} pending job(s), graded {done}; "
          f"{'all done' if finished else 'timed out: the rest stay pending'}")
    return 0 if finished else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="judgehooks", description="Grade agno runs with LLM judges.")
    sub = parser.add_subparsers(dest="command", required=True)
    resume = sub.add_parser("resume", help="grade evaluations left pending by processes that died")
    resume.add_argument("--store", default=os.environ.get("JUDGEHOOKS_DB") or "judgehooks.db",
                        help="store URL or path (sqlite:///path/to.db); default $JUDGEHOOKS_DB or ./judgehooks.db")
    resume.add_argument("--outbox", help="outbox file; default beside the store")
    resume.add_argument("--import", dest="import_", action="append", metavar="MODULE",
                        help="import MODULE first, so its evaluators (with their callbacks) grade their own jobs")
    resume.add_argument("--timeout", type=float, default=600.0, help="seconds to wait (default 600)")
    resume.add_argument("--concurrency", type=int, default=32)
    resume.set_defaults(func=cmd_resume)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
