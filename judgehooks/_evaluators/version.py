"""Evaluator versions: a short hash of everything that decides a verdict, stored on every record
(``evaluator_version``), so a pass rate never silently mixes two different judges.

What goes in: the evaluator's class (and, for a class written outside judgehooks, its source),
its own settings (criteria, rubric lines, a check's pattern, composite members by their own
versions, a function's source), its mode and threshold, and for an LLM judge the prompt it would
send (template text, criteria, guidelines, with a fixed placeholder in place of the run and the
nonce) and the judge's model. What stays out: the name (records are already grouped by it), the
deployment settings (store, callbacks, background, sampling) and how the judge is reached
(api_base, keys, timeouts, retries): they change whether a verdict arrives, not which one.

The hash is of canonical JSON (sorted keys), so it is the same in every process and every run.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._base.context import EvalContext
from .._base.session import Turn
from .._base.text import lone_surrogate, unstorable_at
from .._judges.call import JudgeCall
from .._judges.prompt import build_request, session_refs, single
from .._judges.transcript import Transcript, build_session_request

#: settings that decide whether and how a judge is reached, or how results are shown, not the verdict
NOT_VERDICT = frozenset({
    "api_base", "api_key", "timeout", "retries", "retry_backoff", "litellm_kwargs", "judge_process",
    "judge_processes", "print_summary", "print_results", "show_spinner", "file_path_to_save_results",
    "debug_mode", "db", "telemetry", "run_in_background", "on_fail", "engine",
    # the judge is described once, by the model it calls (`judge_model`)
    "model", "judge", "evaluator_agent",
    # named, or derived from the class and the settings hashed already
    "name", "threshold", "evaluator_name", "mode", "needs_tools", "scale",
})

#: characters of the hex digest kept: 12 give one collision in ~16 million versions of one evaluator
LENGTH = 12


def digest(data: Any) -> str:
    """The version of JSON-like `data`: canonical JSON, hashed."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_fallback)
    try:
        return hashlib.sha256(text.encode()).hexdigest()[:LENGTH]
    except UnicodeEncodeError:
        found = unstorable_at(data) or ("settings", 0)
        raise lone_surrogate(f"the evaluator's {found[0].removeprefix('settings.')}", found[1]) from None


def _fallback(value: Any) -> str:  # pragma: no cover - canonical() leaves nothing json cannot encode
    return type(value).__qualname__


def source_of(obj: Any) -> str:
    """A function's or class's source text, else its bytecode and constants (a lambda typed at a
    prompt has no source file); the same in every process running the same code."""
    try:
        return str(inspect.getsource(obj))
    except (OSError, TypeError):
        code = getattr(obj, "__code__", None)
        if code is None:
            return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"
        return str(code.co_code.hex()) + repr(code.co_consts)


def _qualified(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', getattr(obj, '__name__', ''))}"


def canonical(value: Any) -> Any:
    """`value` as JSON data that stands for what it decides: an evaluator by its version, a judge by
    its model, a function by its source, a class by its name (and a pydantic model by its schema)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value  # 7 and 7.0 are the same threshold
    if isinstance(value, enum.Enum):
        return canonical(value.value)
    version = getattr(value, "evaluator_version", None)
    if isinstance(version, str):  # a member evaluator
        return {"evaluator": version}
    if isinstance(value, Mapping):
        return {str(canonical(k)): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(json.dumps(canonical(v), sort_keys=True) for v in value)
    if isinstance(value, type):
        schema = getattr(value, "model_json_schema", None)
        return {"class": _qualified(value), **({"schema": schema()} if callable(schema) else {})}
    if isinstance(getattr(value, "model", None), str) and callable(getattr(value, "complete", None)):
        return {"judge": value.model}  # before dataclasses: a judge's fields hold its keys
    if dataclasses.is_dataclass(value):
        return {"class": _qualified(type(value)),
                **{f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if inspect.isroutine(value) or callable(value):
        return {"function": _qualified(value), "source": hashlib.sha256(source_of(value).encode()).hexdigest()}
    return {"object": _qualified(type(value))}


def version_of(evaluator: Any, inputs: Mapping[str, Any]) -> str:
    """The version of `evaluator`, whose verdict-deciding settings are `inputs`."""
    cls = type(evaluator)
    own = {"class": _qualified(cls), "mode": evaluator.mode, "threshold": canonical(evaluator.pass_threshold),
           "settings": canonical(dict(inputs))}
    if not cls.__module__.startswith("judgehooks."):  # user code: its evaluate() decides too
        own["source"] = hashlib.sha256(source_of(cls).encode()).hexdigest()
    return digest(own)


# The run's text and the nonce are placeholders: the prompt's wording is what is versioned.
_PLACEHOLDER = EvalContext(input="{input}", output="{output}")


def prompt_text(call: JudgeCall) -> str:
    """The messages `call` would send, with placeholders for the run, its context and the nonce: the
    template text, criteria, verdict shape and guidelines, as the judge reads them."""
    # a {session_state[key]} the criteria name is versioned as itself, fenced where the value goes
    state = {key: f"{{session_state[{key}]}}" for key in session_refs(call.criteria, *call.guidelines)}
    ctx = dataclasses.replace(_PLACEHOLDER, session_state=state) if state else _PLACEHOLDER
    request = build_request(ctx, criteria=call.criteria, mode=single(call.mode), guidelines=call.guidelines,
                            include_tools=call.include_tools,
                            context="{context}" if call.context_key is not None else None, nonce="{nonce}")
    return "\n".join(f"{m['role']}: {m['content']}" for m in request.messages)


def session_prompt_text(call: JudgeCall) -> str:
    """The messages a session judge's `call` would send about a one-turn conversation of
    placeholders: the session template's wording, criteria, verdict shape and guidelines."""
    transcript = Transcript(turns=(Turn(_PLACEHOLDER),), numbers=(1,), total=1, chars=0)
    request = build_session_request(transcript, criteria=call.criteria, mode=single(call.mode),
                                    guidelines=call.guidelines,
                                    include_tools=call.include_tools, nonce="{nonce}")
    return "\n".join(f"{m['role']}: {m['content']}" for m in request.messages)


def judge_inputs(calls: tuple[JudgeCall, ...] | list[JudgeCall],
                 text: Callable[[JudgeCall], str] = prompt_text) -> dict[str, Any]:
    """What an LLM evaluator's judge calls add to its version: each prompt (as `text` renders it),
    and the model asked."""
    return {"prompts": [text(c) for c in calls], "judge_model": sorted({c.judge.model for c in calls})}


def members(values: Iterable[Any]) -> list[Any]:
    """The evaluators among a composite's settings (members, judges, checks), nested or not."""
    found: list[Any] = []
    for value in values:
        if isinstance(getattr(value, "evaluator_version", None), str):
            found.append(value)
        elif isinstance(value, Mapping):
            found += members([*value.keys(), *value.values()])
        elif isinstance(value, (list, tuple)):
            found += members(value)
    return found


class Version:
    """An evaluator's version, hashed once from its `version_inputs()`; a composite's is hashed
    again when a member's version has changed since (a member's setting assigned later)."""

    __slots__ = ("members", "seen", "value")

    def __init__(self, evaluator: Any) -> None:
        inputs = evaluator.version_inputs()
        self.members = tuple(members(inputs.values()))
        self.seen = tuple(m.evaluator_version for m in self.members)
        self.value = version_of(evaluator, inputs)

    def current(self, evaluator: Any) -> str:
        if self.members and tuple(m.evaluator_version for m in self.members) != self.seen:
            evaluator._new_version()
            return str(evaluator.__dict__["_version"].value)
        return self.value
