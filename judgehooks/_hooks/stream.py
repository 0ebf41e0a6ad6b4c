"""Streamed runs held until the gate passes: `judgehooks.stream` and `judgehooks.astream`.

agno runs an agent's or team's ``post_hooks`` inside its stream, after the last content event has
gone to the client, so a gate on a plain streamed run gates nothing (agno-agi/docs#164). These run
the same agno stream (``stream=True``) and withhold its content events until the stream ends. The
gate itself is still agno's own post-hook call, once per run, into one stored record: this module
never grades, it only reads how agno ended the run.

- passed: the held content events, in order, then what follows (the completed event);
- repaired: the gate replaced the run's content, so one content event carries the repaired answer
  instead of the rejected text;
- blocked (the gate's `OutputCheckError`, which agno turns into its run error event): the held
  content is dropped, one content event carries the gate's fallback, then a completed event;
- any other error: the held content was never checked and is dropped; agno's error event follows.

Other events (tool calls, reasoning, hooks) pass through as they come; ``hold="all"`` holds them
too. A member's content in a team stream is held with the leader's, and dropped if the member's own
gate blocked it. Without a gate in the post hooks (the owner's or a member's) nothing is held.

``checkpoints="sentence"`` (or a function of the text so far that returns how much of it may go,
or None) releases the owner's text in pieces while the judge still holds the end: at each
checkpoint the gates' cheap deterministic checks (evaluators with ``prefix_check``, such as
`NotContains` or a `Regex` that must not match, alone or inside `Ordered` / `Group`) run on the text
so far, and when all pass, the content events that end at or before the checkpoint go out. A check
that fails or raises stops the release for the rest of the run (``stream_checkpoint_failed``);
the gate's own verdict at the end then decides what replaces the rest. Released text cannot be
taken back. A gate with no such check, or a member's gate, releases nothing early.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import fields
from typing import Any, Literal

from .._base.context import EvalContext
from .._base.log import log
from .._base.outcome import Outcome, run_evaluator
from .._runtime import runtime
from .agno_compat import MARKER

Hold = Literal["content", "all"]
#: where the text streamed so far may be released: "sentence", or a function of the text so far
#: returning how many of its characters may go (None: none yet)
Checkpoints = Literal["sentence"] | Callable[[str], "int | None"]
_CONTENT = {"RunContent", "RunIntermediateContent", "TeamRunContent", "TeamRunIntermediateContent"}
_ERRORS = {"RunError", "TeamRunError"}
#: the events that say the content is over: they follow the content they close
_CLOSING = {"RunContentCompleted", "TeamRunContentCompleted", "RunCompleted", "TeamRunCompleted"}


def stream(agent_or_team: Any, input: Any, *, hold: Hold = "content", checkpoints: Checkpoints | None = None,
           **run_kwargs: Any) -> Iterator[Any]:
    """Run `agent_or_team` with ``stream=True`` and yield agno's events, content held until every
    gate in its post hooks has passed, or, with `checkpoints`, until its cheap checks have passed on
    the text so far (see the module docstring)."""
    holder = _Holder(agent_or_team, hold, run_kwargs, checkpoints)
    for event in agent_or_team.run(input, **holder.kwargs):
        yield from holder.feed(event)
        point = holder.checkpoint()
        if point is not None:
            ctx = EvalContext(input=str(input), output=holder.text[:point])
            yield from holder.release(point, [runtime.call(run_evaluator, c, ctx) for c in holder.checks])
    yield from holder.end()


async def astream(agent_or_team: Any, input: Any, *, hold: Hold = "content", checkpoints: Checkpoints | None = None,
                  **run_kwargs: Any) -> AsyncIterator[Any]:
    """`stream` for ``arun``: the same events, from agno's async stream."""
    holder = _Holder(agent_or_team, hold, run_kwargs, checkpoints)
    async for event in agent_or_team.arun(input, **holder.kwargs):
        for out in holder.feed(event):
            yield out
        point = holder.checkpoint()
        if point is not None:
            ctx = EvalContext(input=str(input), output=holder.text[:point])
            for out in holder.release(point, [await run_evaluator(c, ctx) for c in holder.checks]):
                yield out
    for out in holder.end():
        yield out


def sentence_ends(text: str, start: int = 0) -> int | None:
    """The last sentence end in `text` at or after `start`: just past a '.', '!', '?' or newline that
    whitespace follows (or a newline). One pass from `start`, no regular expression."""
    last = None
    for i in range(max(start - 1, 0), len(text) - 1):
        if text[i] == "\n" or (text[i] in ".!?" and text[i + 1].isspace()):
            last = i + 1
    if text.endswith("\n"):
        last = len(text)
    return last


def gated(owner: Any) -> bool:
    """Whether a judgehooks gate sits in the post hooks of `owner` or of any of its members."""
    return bool(_gate_shells(owner)) or any(gated(member) for member in getattr(owner, "members", None) or [])


def _gate_shells(owner: Any) -> list[Any]:
    shells = []
    for hook in list.__iter__(getattr(owner, "post_hooks", None) or []):
        target = getattr(getattr(hook, "func", hook), "__self__", hook)
        shell = getattr(target, "__dict__", {}).get("_shell") if getattr(target, MARKER, False) else None
        if shell is not None and shell.gate is not None:
            shells.append(shell)
    return shells


def prefix_checks(owner: Any) -> list[Any]:
    """The cheap checks a checkpoint runs: every gate of `owner` must have one (a gate with only a
    judge has nothing to say about a prefix), and no member may have a gate; else none."""
    if any(gated(member) for member in getattr(owner, "members", None) or []):
        return []
    found = []
    for shell in _gate_shells(owner):
        own = _prefix_checks_in(shell.evaluator)
        if not own:
            return []
        found.extend(own)
    return found


def _prefix_checks_in(evaluator: Any) -> list[Any]:
    if getattr(evaluator, "prefix_check", False):
        return [evaluator]
    inner = getattr(evaluator, "checks", None) or getattr(evaluator, "members", None)
    if not isinstance(inner, (list, tuple)):  # Ordered's checks, Group's members; not an Ensemble's samples
        return []
    return [c for member in inner for c in _prefix_checks_in(member)]


class _Holder:
    """What a client sees of one streamed run: events in, the events to yield out."""

    def __init__(self, owner: Any, hold: Hold, run_kwargs: dict[str, Any], checkpoints: Checkpoints | None) -> None:
        if hold not in ("content", "all"):
            raise ValueError(f"hold must be 'content' or 'all', got {hold!r}")
        if checkpoints is not None and checkpoints != "sentence" and not callable(checkpoints):
            raise ValueError(f"checkpoints must be 'sentence', a function of the text so far, or None, "
                             f"got {checkpoints!r}")
        if run_kwargs.get("stream", True) is not True:
            raise ValueError("judgehooks.stream runs the agent with stream=True; do not pass stream=False")
        self.wanted_output = bool(run_kwargs.get("yield_run_output"))
        self.kwargs = {**run_kwargs, "stream": True, "yield_run_output": True}
        self.active = gated(owner)
        self.hold_all = hold == "all"
        self.held: list[Any] = []
        self.blocked_runs: set[str | None] = set()
        self.gate_error: Any = None  # a gate's error event, until we know whether it ends the stream
        # checkpoints: the owner's own content (a team's leader, or the agent) is released in pieces
        self.finder = sentence_ends if checkpoints == "sentence" else checkpoints
        self.checks = prefix_checks(owner) if self.active and checkpoints is not None else []
        self.own_kind = "TeamRunContent" if getattr(owner, "members", None) is not None else "RunContent"
        self.text = ""  # the owner's content so far
        self.released_text = ""  # what of it has gone out
        self.scanned = 0  # how far sentence_ends has looked
        self.ends: dict[int, int] = {}  # id of a held own content event -> where its text ends in self.text
        self.stopped = False

    def feed(self, event: Any) -> list[Any]:
        out: list[Any] = []
        if self.gate_error is not None:  # it did not end the stream: a member's gate blocked a member's run
            out.append(self.gate_error)
            self.gate_error = None
        kind = getattr(event, "event", None)
        if not self.active:
            return out if _is_run_output(event) and not self.wanted_output else [*out, event]
        if kind in _ERRORS and _from_gate(event):
            self.blocked_runs.add(event.run_id)
            self.gate_error = event
        elif kind in _CONTENT or kind in _CLOSING or self.hold_all or _is_run_output(event):
            self.held.append(event)
            if kind == self.own_kind and self.checks and isinstance(event.content, str):
                self.text += event.content
                self.ends[id(event)] = len(self.text)
        elif kind in _ERRORS:  # not a gate: the held content was never checked
            self.held = [e for e in self.held if getattr(e, "event", None) not in _CONTENT]
            out.extend([*self.held, event])
            self.held = []
        else:
            out.append(event)
        return out

    def checkpoint(self) -> int | None:
        """Where the text so far may be cut for release, if past what has gone; None: not now."""
        if not self.checks or self.stopped or self.gate_error is not None or len(self.text) <= len(self.released_text):
            return None
        if self.finder is sentence_ends:
            point = sentence_ends(self.text, self.scanned)
            self.scanned = len(self.text)
        else:
            try:
                point = self.finder(self.text)  # type: ignore[misc]
            except Exception as exc:  # the finder reads model output: its failure stops the release
                self._stop(f"the checkpoint finder raised {type(exc).__name__}: {exc}")
                return None
        if point is None or isinstance(point, bool) or not isinstance(point, int):
            return None
        return point if len(self.released_text) < point <= len(self.text) else None

    def release(self, point: int, outcomes: list[Outcome]) -> list[Any]:
        """After the checks ran on ``text[:point]``: the held events up to that point, or nothing (and no
        more releases in this run) when one failed or raised."""
        bad = [(c.evaluator_name, o) for c, o in zip(self.checks, outcomes, strict=True) if o.status != "passed"]
        if bad:
            name, outcome = bad[0]
            why = f"{type(outcome.error).__name__}: {outcome.error}" if outcome.error is not None else outcome.reason
            self._stop(f"{name} {outcome.status} at character {point}: {why}")
            return []
        cut = -1
        for i, event in enumerate(self.held):
            end = self.ends.get(id(event))
            if end is not None:
                if end > point:
                    break
                cut = i
            elif getattr(event, "event", None) in _CONTENT:  # a member's content is never released early
                break
        if cut < 0:
            return []
        out, self.held = self.held[:cut + 1], self.held[cut + 1:]
        self.released_text = self.text[:self.ends[id(out[-1])]]
        for event in out:
            self.ends.pop(id(event), None)
        return out

    def _stop(self, why: str) -> None:
        self.stopped = True
        log.warning("stream_checkpoint_failed", released_chars=len(self.released_text), reason=why[:300])

    def end(self) -> list[Any]:
        if not self.active:
            return []
        if self.gate_error is not None:  # the stream ended with a gate's block
            error = self.gate_error
            self.blocked_runs.add(error.run_id)
            rest = [e for e in self._released() if getattr(e, "event", None) not in _ERRORS]
            return [*rest, _event_like(error, "content", error.content), _event_like(error, "completed",
                                                                                    error.content)]
        output = next((e for e in self.held if _is_run_output(e)), None)
        released = self._released()
        if output is not None:
            released = self._final_content(released, output, self.released_text)
        return [e for e in released if self.wanted_output or not _is_run_output(e)]

    def _released(self) -> list[Any]:
        """The held events still to show: content of a run a gate blocked is dropped."""
        return [e for e in self.held
                if not (getattr(e, "event", None) in _CONTENT and getattr(e, "run_id", None) in self.blocked_runs)]

    @staticmethod
    def _final_content(events: list[Any], output: Any, gone: str = "") -> list[Any]:
        """After a repair the run's content is not what was streamed: show the run's content instead
        (past `gone`, the text a checkpoint already released, when the repaired answer starts with it)."""
        own = [e for e in events if getattr(e, "event", None) in _CONTENT and e.run_id == output.run_id]
        pieces = [e.content for e in own if e.content is not None]
        streamed: Any = "".join(pieces) if all(isinstance(p, str) for p in pieces) else (pieces[-1] if pieces else None)
        if gone and isinstance(streamed, str):
            streamed = gone + streamed
        if streamed == output.content or not own:
            return events
        content = output.content
        if gone and isinstance(content, str) and content.startswith(gone):
            content = content[len(gone):]
        mine = {id(e) for e in own}
        first = next(i for i, e in enumerate(events) if id(e) in mine)
        kept = [e for e in events if id(e) not in mine]
        kept.insert(first, _event_like(own[0], "content", content))
        return kept


def _is_run_output(event: Any) -> bool:
    from agno.run.agent import RunOutput
    from agno.run.team import TeamRunOutput

    return isinstance(event, (RunOutput, TeamRunOutput))


def _from_gate(event: Any) -> bool:
    """A run error raised by a judgehooks gate (`Gate.block` names its evaluator and record)."""
    data = getattr(event, "additional_data", None)
    return isinstance(data, dict) and "evaluator" in data and "repair_attempts" in data


def _event_like(source: Any, kind: Literal["content", "completed"], content: Any) -> Any:
    """agno's content or completed event for the run `source` belongs to (an agent's or a team's)."""
    from agno.run import agent, team

    module: Any = team if getattr(source, "event", "").startswith("Team") else agent
    cls = module.RunContentEvent if kind == "content" else module.RunCompletedEvent
    names = {f.name for f in fields(cls)} & {f.name for f in fields(type(source))}
    shared = {n: getattr(source, n) for n in names if n not in ("event", "created_at", "content")}
    return cls(**shared, content=content)
