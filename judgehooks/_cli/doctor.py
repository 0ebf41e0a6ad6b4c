"""Check that each evaluator can grade: its store, its judge's key, endpoint and verdicts, with fixes.

    judgehooks doctor --import myapp.evals

A misconfigured judge is silent inside an application (every run just ends as an error record), so
this asks each evaluator the imported modules define, at module level or in an agent's or team's
`post_hooks`, the four things that break first: can its store be opened and written, is the judge's
API key set, does the judge's endpoint answer one tiny question, and does the answer parse as a
verdict. Each problem is printed with its fix; the exit status is 1 when there is any.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from .._base.context import EvalContext
from .._base.urls import redact
from .._evaluators.base import Evaluator
from .._judges.base import load_litellm
from .._judges.call import JudgeCall, RetryPolicy
from .._judges.litellm import LiteLLMJudge
from ..exceptions import JudgeUnavailable, MalformedVerdict
from .common import call, import_module, label_of, module_evaluators, one_line
from .common import store_at as open_store_at
from .options import CommandError
from .terminal import say

#: the question every judge is asked: small, and with one right answer
QUESTION = EvalContext(input="What is 2 + 2?", output="4", run_id="judgehooks-doctor")


@dataclass(frozen=True)
class Check:
    """One thing checked: what, whether it holds, and if not, the fix."""
    what: str
    ok: bool
    detail: str
    fix: str = ""


def run(args: argparse.Namespace) -> int:
    if not args.timeout > 0:
        raise CommandError(f"doctor: --timeout must be > 0, got {args.timeout}", code=2)
    found: dict[int, tuple[Evaluator, list[str]]] = {}
    for name in args.import_ or ():
        for evaluator, used_by in evaluators_in(import_module(name, "doctor: --import")):
            found.setdefault(id(evaluator), (evaluator, []))[1].extend(used_by)
    problems = 0
    if not found:
        store = open_store_at(args.store, must_exist=False)
        checks = [check_store(store, label_of(args.store))]
        problems += _show(f"store {label_of(args.store)}", checks)
        say("no evaluators checked: pass --import MODULE, the module that builds your evaluators or agents"
            if not args.import_ else f"no judgehooks evaluator in {', '.join(args.import_)} (at module level or "
                                     "in an agent's or team's post_hooks)")
        return 1 if problems or args.import_ else 0
    for evaluator, used_by in found.values():
        title = f"{evaluator.evaluator_name} ({type(evaluator).__name__})"
        if used_by:
            title += f", in the post_hooks of {', '.join(dict.fromkeys(used_by))}"
        problems += _show(title, list(checks_of(evaluator, args.timeout)))
    say(f"{problems} problem(s) found" if problems else f"all {len(found)} evaluator(s) ready")
    return 1 if problems else 0


def evaluators_in(module: Any) -> Iterator[tuple[Evaluator, list[str]]]:
    """Each evaluator `module` defines at module level, and each in the post_hooks of a module-level
    agent or team (or of a team's members), with who uses it."""
    for evaluator in module_evaluators(module):
        yield evaluator, []
    for value in vars(module).values():
        yield from _hooked(value, set())


def _hooked(owner: Any, seen: set[int]) -> Iterator[tuple[Evaluator, list[str]]]:
    hooks = getattr(owner, "post_hooks", None)
    if isinstance(owner, (type, Evaluator)) or not isinstance(hooks, list) or id(owner) in seen:
        return
    seen.add(id(owner))
    kind = type(owner).__name__.lower()
    label = f"{kind} {getattr(owner, 'name', None) or getattr(owner, 'id', None) or '(unnamed)'}"
    for hook in hooks:
        if isinstance(hook, Evaluator):
            yield hook, [label]
    for member in getattr(owner, "members", None) or ():
        yield from _hooked(member, seen)


def checks_of(evaluator: Evaluator, timeout: float) -> Iterator[Check]:
    try:
        store = evaluator.store
    except Exception as exc:
        yield Check("store", False, one_line(exc), "pass store= a store URL or path that exists (see the stores page)")
    else:
        yield check_store(store, repr(store))
    calls = _judge_calls(evaluator)
    if not calls:
        yield Check("judge", True, "none: this evaluator grades without an LLM")
        return
    first = calls[0]  # every call of one evaluator shares its judge
    key = check_key(first.judge)
    if key is not None:
        yield key
        if not key.ok:
            return
    yield from check_judge(first, timeout)


def _judge_calls(evaluator: Evaluator) -> list[JudgeCall]:
    one = evaluator.__dict__.get("_call")
    many = evaluator.__dict__.get("_calls") or ()
    return [c for c in ([one] if one is not None else []) + list(many) if isinstance(c, JudgeCall)]


def check_store(store: Any, label: str) -> Check:
    """Opened with one read; a local file also checked writable (a file not there yet: its folder)."""
    label = redact(label)
    try:
        call(store.query, limit=1)
    except Exception as exc:
        return Check("store", False, f"{label}: cannot read: {one_line(exc)}",
                     "check the URL or path, that the server is up and that this user may connect")
    path = _path_of(store)
    if path is not None and path != ":memory:":
        target = path if os.path.exists(path) else os.path.dirname(os.path.abspath(path))
        if not os.access(target, os.W_OK):
            return Check("store", False, f"{label}: {target} is not writable by this user",
                         f"give this user write access to {target}, or pass store= a path it may write")
    return Check("store", True, f"{label}: opened" + (", writable" if path is not None else ""))


def _path_of(store: Any) -> str | None:
    for candidate in (store, getattr(store, "store", None), getattr(store, "inner", None)):
        path = getattr(candidate, "path", None)
        if isinstance(path, str):
            return path
    return None


def check_key(judge: Any) -> Check | None:
    """A litellm judge's provider, then its key, from litellm's own table of variables; None for
    other judges. A model naming no provider fails here: litellm could neither route it nor say
    which key it needs (its table then reports every key present)."""
    if not isinstance(judge, LiteLLMJudge):
        return None
    given = judge.call_kwargs
    litellm = load_litellm()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # litellm prints its provider list on this error
            litellm.get_llm_provider(judge.model, api_base=given.get("api_base"))
    except Exception:
        return Check("provider", False,
                     f"{judge.model!r} names no provider, so no key can be looked up and no call can be routed "
                     "(litellm reads the provider from the model string's prefix)",
                     f"write the model as provider/name: openai/{judge.model} for an OpenAI-compatible server "
                     "(with api_base=...), or anthropic/..., gemini/..., ollama/... "
                     "(https://docs.litellm.ai/docs/providers)")
    if given.get("api_key"):
        return Check("key", True, "api_key given to the evaluator")
    try:
        env = litellm.validate_environment(model=judge.model, api_base=given.get("api_base"))
    except Exception as exc:  # an unknown provider: the call will say more
        return Check("key", True, f"not checked ({one_line(exc)})")
    missing = list(env.get("missing_keys") or [])
    if missing:
        return Check("key", False, f"no {' or '.join(missing)} in the environment for {judge.model!r}",
                     f"export {missing[0]}=... (any string for a local server that needs none), or pass "
                     "api_key=... to the evaluator")
    return Check("key", True, "the provider's key is set in the environment")


def check_judge(judge_call: JudgeCall, timeout: float) -> Iterator[Check]:
    """One tiny question through the evaluator's own judge, prompt and verdict parser, no retries."""
    judge = judge_call.judge
    where = _endpoint(judge)
    limit = min(timeout, judge_call.timeout)
    once = replace(judge_call, retry=RetryPolicy(retries=0), timeout=limit)
    outcome = call(once.ask, QUESTION)
    error = outcome.error
    if error is None:
        yield Check("endpoint", True, f"{where} answered")
        yield Check("structured output", True, f"the reply parses as a verdict ({_verdict(outcome)})")
        return
    if isinstance(error, MalformedVerdict):
        yield Check("endpoint", True, f"{where} answered")
        yield Check("structured output", False, f"the reply does not parse as a verdict: {one_line(error)}",
                    "use a model that follows a JSON schema (structured_output=True, the default) or a larger model; "
                    "for a server that refuses response_format, keep structured_output=True: the prompt's format is "
                    "the fallback")
        return
    if isinstance(error, JudgeUnavailable) and "key" in str(error).lower():
        yield Check("key", False, one_line(error), "set the variable it names, or pass api_key=... to the evaluator")
        return
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)) or "timeout" in type(error).__name__.lower():
        yield Check("endpoint", False, f"{where} gave no answer within {limit:g}s",
                    "check that the server is up and not overloaded; raise timeout= if it is just slow")
        return
    yield Check("endpoint", False, f"{where}: {one_line(error)}",
                "check api_base= (is the server running, is the path right, e.g. .../v1?) and the model name")


def _endpoint(judge: Any) -> str:
    base = judge.call_kwargs.get("api_base") if isinstance(judge, LiteLLMJudge) else None
    model = getattr(judge, "model", None) or type(judge).__name__
    return f"{model} at {redact(base)}" if base else f"{model} (the provider's default endpoint)"


def _verdict(outcome: Any) -> str:
    if outcome.score is not None:
        return f"score {outcome.score:g}"
    return "passed" if outcome.passed else "failed"


def _show(title: str, checks: list[Check]) -> int:
    say(title, one_line=True)
    for check in checks:
        say(f"  {'ok  ' if check.ok else 'FAIL'}  {check.what}: {check.detail}", one_line=True)
        if not check.ok and check.fix:
            say(f"        fix: {check.fix}", one_line=True)
    return sum(not check.ok for check in checks)
