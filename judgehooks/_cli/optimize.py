"""Search for better agent instructions on failed cases, measured on held-out ones (needs judgehooks[optimize])."""

from __future__ import annotations

import argparse
import inspect
import json
import os
from typing import Any

from .._optimize.cases import load_cases, split
from .._optimize.optimize import OptimizeResult, optimize
from ..stores import RecordFilter
from .common import clip, import_object, one_line, open_store, table
from .grade import _progress
from .options import CommandError
from .terminal import say


def _load(spec: str, what: str, check: Any) -> Any:
    obj = import_object(spec, f"optimize: {what}")
    if not check(obj) and (inspect.isfunction(obj) or inspect.isclass(obj)):  # a factory (an evaluator is callable too)
        obj = obj()
    if not check(obj):
        raise CommandError(f"optimize: {what} {spec!r} is a {type(obj).__name__}", code=2)
    return obj


def _is_agent(obj: Any) -> bool:
    return callable(getattr(obj, "deep_copy", None)) and callable(getattr(obj, "arun", None))


def _is_evaluator(obj: Any) -> bool:
    return hasattr(obj, "evaluate") and hasattr(obj, "evaluator_name")


def run(args: argparse.Namespace) -> int:
    agent = _load(args.import_agent, "--import-agent", _is_agent)
    evaluators = [_load(spec, "--import-evaluator", _is_evaluator) for spec in args.import_evaluator]
    if args.cases is not None:
        cases: Any = args.cases
        where = None
        if args.since is not None or args.agent_id is not None:
            raise CommandError("optimize: --since and --agent-id filter --from-store records", code=2)
    else:
        cases = open_store(args.from_store, must_exist=True)  # what every --store takes, read the same way
        where = RecordFilter(status=args.status, since=args.since, agent_id=args.agent_id or getattr(agent, "id", None))
    try:
        found = load_cases(cases, where)
        held = len(split(found, args.holdout, args.seed)[1])
    except (ValueError, TypeError, OSError) as exc:
        raise CommandError(f"optimize: {one_line(exc)}", code=2) from None
    # the bar counts agent runs: the search's, then the held-out cases' before and after
    with _progress(args.progress, args.max_metric_calls + 2 * held, "optimizing") as advance:
        try:
            result = optimize(agent, found, evaluators=evaluators, reflection_model=args.reflection_model,
                              api_base=args.api_base, api_key=args.api_key or os.environ.get("JUDGEHOOKS_API_KEY"),
                              max_metric_calls=args.max_metric_calls, holdout=args.holdout, seed=args.seed,
                              max_cost_usd=args.max_cost_usd, max_calls=args.max_calls,
                              concurrency=args.concurrency, run_dir=args.run_dir, progress=advance)
        except (ValueError, TypeError, ImportError, OSError) as exc:
            raise CommandError(f"optimize: {one_line(exc)}", code=2) from None
    failed = result.reflection_never_answered  # nothing was tried: writing the original back would hide it
    out = None if failed else args.out
    if out:
        try:
            with open(out, "w", encoding="utf-8") as fh:
                fh.write(result.instructions + ("" if result.instructions.endswith("\n") else "\n"))
        except OSError as exc:
            raise CommandError(f"optimize: cannot write {out!r}: {one_line(exc)}") from None
    say(json.dumps(result.to_json(), indent=2) if args.json else render(result, out))
    if failed:
        written = f"; {args.out} was not written" if args.out else ""
        raise CommandError(f"optimize: the reflection model never answered ({result.spend['reflection_failures']} "
                           f"call(s) failed), so no candidate was tried: {result.reflection_error}{written}")
    return 0


#: what each `stopped` value means, as printed
STOPPED = {
    "budget": "--max-metric-calls had no room for another try",
    "perfect": "a candidate passed every training case",
    "max_calls": "the --max-calls cap was reached; the best candidate so far is reported",
    "max_cost_usd": "the --max-cost-usd cap was reached; the best candidate so far is reported",
    "interrupted": "interrupted; the best candidate so far is reported",
    "reflection_failed": "the reflection model failed and no candidate came from it",
}


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def render(result: OptimizeResult, out: str | None) -> str:
    """The candidates and their scores, the held-out comparison, and the diff."""
    rows = [[str(c.index), ",".join(map(str, c.parents)) or "-", _rate(c.train_score), _rate(c.holdout_score),
             clip(c.text, 60)] for c in result.candidates]
    spend = result.spend
    calls = ", ".join(f"{k} {v}" for k, v in spend["calls"].items())
    lines = [table(["#", "from", "train", "held-out", "instructions"], rows), "",
             f"held-out pass rate: {_rate(result.score_before)} -> {_rate(result.score_after)} "
             f"({result.holdout_size} held-out, {result.train_size} training cases)",
             f"  {result.note}",
             f"calls: {calls}; cost {spend['cost_usd']} USD"]
    lines.append(f"stopped: {result.stopped} ({STOPPED.get(result.stopped, 'see the result')})")
    if result.reflection_error:
        lines.append(f"reflection model: {result.reflection_error}")
    if result.echoed:
        lines.append("echoed from case data: the new instructions hold these verbatim from the cases, their answers "
                     "or their reasons (text a user may have planted there); check them before you deploy:")
        lines += [f"  ! {item}" for item in result.echoed]
    if out:
        lines.append(f"wrote the best instructions to {out}")
    diff = result.diff()
    lines += ["", diff.rstrip("\n") if diff else "(the instructions are unchanged)"]
    return "\n".join(lines)
