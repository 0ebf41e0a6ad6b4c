"""The judge's view of a whole conversation: which turns fit the budget, and the fenced prompt.

Pure. A transcript over its budget keeps the first turn and the last `keep_last` turns with a
marked gap between them (then fewer last turns, then shortened texts, until it fits), and says so
in `Transcript.details()`, which the record carries. Every turn's input, output, member runs and
tool calls are fenced with the request's nonce, as a single run's are (`prompt.py`).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .._base.context import EvalContext
from .._base.record import Mode
from .._base.session import Member, Turn
from .call import JudgeCall
from .prompt import JudgeRequest, fence, system_prompt

BudgetUnit = Literal["chars", "tokens"]
#: a token budget is held as characters at this rate (an estimate: no tokenizer is loaded)
CHARS_PER_TOKEN = 4
#: no text is shortened below this many characters, whatever the budget
MIN_TEXT_CHARS = 200


@dataclass(frozen=True, slots=True)
class Transcript:
    """The turns the judge reads: `numbers` are their 1-based positions in the window."""

    turns: tuple[Turn, ...]
    numbers: tuple[int, ...]
    total: int
    chars: int  # of the whole window's texts, before clipping
    clipped: bool = False
    omitted: tuple[int, int] | None = None  # first and last turn left out
    shortened: int = 0  # texts cut to fit

    def details(self) -> dict[str, Any]:
        found: dict[str, Any] = {"turns": self.total, "judged_turns": len(self.turns), "chars": self.chars,
                                 "clipped": self.clipped}
        if self.omitted is not None:
            found["omitted_turns"] = list(self.omitted)
        if self.shortened:
            found["shortened_texts"] = self.shortened
        return found


def _tools(run: EvalContext) -> str:
    return json.dumps([c.as_dict() for c in run.tool_calls], ensure_ascii=False, default=str)


def _size(turn: Turn, tools: bool) -> int:
    run = turn.run
    size = len(run.input) + len(run.output) + sum(len(m.input) + len(m.output) for m in turn.members)
    return size + (len(_tools(run)) if tools and run.tool_calls else 0)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = f" … [clipped from {len(text)} characters]"
    return text[:max(0, limit - len(marker))] + marker


def _shorten(turn: Turn, limit: int) -> Turn:
    members = tuple(Member(m.name, _cut(m.input, limit), _cut(m.output, limit)) for m in turn.members)
    return Turn(run=replace(turn.run, input=_cut(turn.run.input, limit), output=_cut(turn.run.output, limit)),
                members=members)


def plan(turns: Sequence[Turn], *, budget: int | None, unit: BudgetUnit = "chars", keep_last: int = 8,
         include_tools: bool = False) -> Transcript:
    """The transcript to judge: every turn when it fits `budget`, else the first turn, a gap and as
    many of the last `keep_last` turns as fit, their texts shortened when even that is too long."""
    sizes = [_size(t, include_tools) for t in turns]
    total, numbers = len(turns), tuple(range(1, len(turns) + 1))
    whole = Transcript(turns=tuple(turns), numbers=numbers, total=total, chars=sum(sizes))
    limit = None if budget is None else budget * (CHARS_PER_TOKEN if unit == "tokens" else 1)
    if limit is None or whole.chars <= limit:
        return whole
    last = max(1, min(keep_last, total - 1))
    while last > 1 and sizes[0] + sum(sizes[total - last:]) > limit:
        last -= 1
    keep = [0, *range(total - last, total)] if total > 1 else [0]
    kept = [turns[i] for i in keep]
    shortened = 0
    if sum(sizes[i] for i in keep) > limit:
        texts = sum(2 + 2 * len(t.members) for t in kept)
        share = max(MIN_TEXT_CHARS, limit // max(1, texts))
        before = kept
        kept = [_shorten(t, share) for t in kept]
        shortened = sum(a != b for x, y in zip(before, kept, strict=True)
                        for a, b in zip(_texts(x), _texts(y), strict=True))
    first_gap, last_gap = 2, total - last
    return Transcript(turns=tuple(kept), numbers=tuple(i + 1 for i in keep), total=total, chars=whole.chars,
                      clipped=True, omitted=(first_gap, last_gap) if last_gap >= first_gap else None,
                      shortened=shortened)


def _texts(turn: Turn) -> list[str]:
    return [turn.run.input, turn.run.output, *(t for m in turn.members for t in (m.input, m.output))]


def build_session_request(transcript: Transcript, *, criteria: str, mode: Mode, guidelines: Sequence[str] = (),
                          include_tools: bool = False, nonce: str | None = None) -> JudgeRequest:
    """The judge's messages for a conversation: each turn's parts fenced, in order, with the gap
    (if any) marked outside the fences, where only judgehooks writes."""
    nonce = nonce or secrets.token_hex(8)
    head = f"Grade this conversation between a user and an AI agent: {transcript.total} turn(s), in order."
    if transcript.omitted is not None:
        a, b = transcript.omitted
        head += (f" It was too long to show whole: turns {a} to {b} are left out; the first turn and the last "
                 f"{len(transcript.turns) - 1} are shown.")
    sections = [head]
    previous = 0
    for number, turn in zip(transcript.numbers, transcript.turns, strict=True):
        if number > previous + 1:
            sections.append(f"[... turns {previous + 1} to {number - 1} omitted ...]")
        previous = number
        parts = [f"### Turn {number} of {transcript.total}", fence("INPUT", turn.run.input, nonce)]
        for member in turn.members:
            parts.append(fence("MEMBER", json.dumps(member.as_dict(), ensure_ascii=False), nonce))
        if include_tools and turn.run.tool_calls:
            parts.append(fence("TOOL-CALLS", _tools(turn.run), nonce))
        parts.append(fence("OUTPUT", turn.run.output, nonce))
        sections.append("\n".join(parts))
    subject = "a whole conversation between a user and an AI agent (every turn, together)"
    messages = ({"role": "system", "content": system_prompt(criteria, mode, guidelines, nonce, subject)},
                {"role": "user", "content": "\n\n".join(sections)})
    return JudgeRequest(messages=messages, mode=mode, nonce=nonce)


@dataclass(frozen=True, slots=True)
class SessionCall(JudgeCall):
    """A `JudgeCall` that asks about a whole conversation (its planned transcript), with the same
    retries, timeout and verdict reading as a single run's."""

    transcript: Transcript | None = None

    def request(self, ctx: EvalContext) -> JudgeRequest:
        if self.transcript is None:
            raise ValueError("SessionCall.request needs the transcript planned for this session")
        return build_session_request(self.transcript, criteria=self.criteria, mode=self.mode,
                                     guidelines=self.guidelines, include_tools=self.include_tools)
