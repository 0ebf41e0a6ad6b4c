"""The judge's view of a whole conversation: which turns fit the budget, and the fenced prompt.

Pure. A transcript over its budget keeps the first turn and the last `keep_last` turns with a
marked gap between them (then fewer last turns), and says so in `Transcript.details()`, which the
record carries. The budget then holds for the whole prompt (`prompt.fit_prompt`): the texts shown,
each turn's tool calls and member runs included, are shortened to fit, and if even the prompt's
own words for so many turns do not fit, more middle turns are left out. Every turn's input,
output, member runs and tool calls are fenced with the request's nonce, as a single run's are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .._base.context import EvalContext
from .._base.record import Mode
from .._base.session import Turn
from ..exceptions import EvaluatorError
from .call import JudgeCall
from .prompt import JudgeRequest, Render, fence, fit_prompt, new_nonce, single, system_prompt, tool_calls_text

BudgetUnit = Literal["chars", "tokens"]
#: a token budget is held as characters at this rate (an estimate: no tokenizer is loaded)
CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Transcript:
    """The turns the judge reads: `numbers` are their 1-based positions in the window."""

    turns: tuple[Turn, ...]
    numbers: tuple[int, ...]
    total: int
    chars: int  # of the whole window's texts, before clipping
    clipped: bool = False
    omitted: tuple[int, int] | None = None  # first and last turn left out
    budget: int | None = None  # characters the whole prompt is held to

    def details(self) -> dict[str, Any]:
        found: dict[str, Any] = {"turns": self.total, "judged_turns": len(self.turns), "chars": self.chars,
                                 "clipped": self.clipped}
        if self.omitted is not None:
            found["omitted_turns"] = list(self.omitted)
        return found

    def without_second(self) -> Transcript:
        """The same transcript less the oldest turn shown after the first (the gap grows)."""
        numbers = self.numbers[:1] + self.numbers[2:]
        return replace(self, turns=self.turns[:1] + self.turns[2:], numbers=numbers, clipped=True,
                       omitted=(2, numbers[1] - 1))


def _members(turn: Turn) -> str:
    """A turn's member runs, one JSON line each, in the order they ran."""
    return "\n".join(json.dumps(m.as_dict(), ensure_ascii=False) for m in turn.members)


def _size(turn: Turn, tools: bool) -> int:
    run = turn.run
    size = len(run.input) + len(run.output) + sum(len(m.input) + len(m.output) for m in turn.members)
    return size + (len(tool_calls_text(run)) if tools and run.tool_calls else 0)


def plan(turns: Sequence[Turn], *, budget: int | None, unit: BudgetUnit = "chars", keep_last: int = 8,
         include_tools: bool = False) -> Transcript:
    """The transcript to judge: every turn when it fits `budget`, else the first turn, a gap and as
    many of the last `keep_last` turns as fit (at least one; `build_session_request` shortens
    their texts to the budget)."""
    sizes = [_size(t, include_tools) for t in turns]
    total, numbers = len(turns), tuple(range(1, len(turns) + 1))
    limit = None if budget is None else budget * (CHARS_PER_TOKEN if unit == "tokens" else 1)
    whole = Transcript(turns=tuple(turns), numbers=numbers, total=total, chars=sum(sizes), budget=limit)
    if limit is None or whole.chars <= limit:
        return whole
    last = max(1, min(keep_last, total - 1))
    while last > 1 and sizes[0] + sum(sizes[total - last:]) > limit:
        last -= 1
    keep = [0, *range(total - last, total)] if total > 1 else [0]
    return replace(whole, turns=tuple(turns[i] for i in keep), numbers=tuple(i + 1 for i in keep), clipped=True,
                   omitted=(2, total - last) if total - last >= 2 else None)


def _prompt(transcript: Transcript, system: str, include_tools: bool, nonce: str) -> tuple[Render, list[str]]:
    """The transcript's prompt (see `fit_prompt`) and its untrusted texts, in the order it fences them."""
    turns = [[("INPUT", turn.run.input), *([("MEMBERS", _members(turn))] if turn.members else []),
              *([("TOOL-CALLS", tool_calls_text(turn.run))] if include_tools and turn.run.tool_calls else []),
              ("OUTPUT", turn.run.output)] for turn in transcript.turns]

    def render(texts: Sequence[str], note: str) -> tuple[str, str]:
        head = f"Grade this conversation between a user and an AI agent: {transcript.total} turn(s), in order."
        if transcript.omitted is not None:
            a, b = transcript.omitted
            head += (f" It was too long to show whole: turns {a} to {b} are left out; the first turn and the last "
                     f"{len(transcript.turns) - 1} are shown.")
        sections = [head + (f"\n\n{note}" if note else "")]
        parts = iter(texts)
        previous = 0
        for number, labelled in zip(transcript.numbers, turns, strict=True):
            if number > previous + 1:
                sections.append(f"[... turns {previous + 1} to {number - 1} omitted ...]")
            previous = number
            sections.append("\n".join([f"### Turn {number} of {transcript.total}",
                                       *(fence(label, next(parts), nonce) for label, _ in labelled)]))
        return system, "\n\n".join(sections)

    return render, [text for labelled in turns for _, text in labelled]


def build_session_request(transcript: Transcript, *, criteria: str, mode: Mode, guidelines: Sequence[str] = (),
                          include_tools: bool = False, nonce: str | None = None) -> JudgeRequest:
    """The judge's messages for a conversation, within the transcript's budget: each turn's parts
    fenced, in order, with the gap (if any) and any cut stated outside the fences, where only
    judgehooks writes."""
    nonce = nonce or new_nonce()
    subject = "a whole conversation between a user and an AI agent (every turn, together)"
    system = system_prompt(criteria, mode, guidelines, nonce, subject)
    while True:
        try:
            return fit_prompt(*_prompt(transcript, system, include_tools, nonce), transcript.budget, mode, nonce)
        except EvaluatorError:
            if len(transcript.turns) <= 2:  # the first and the last turn: nothing more to leave out
                raise
            transcript = transcript.without_second()


@dataclass(frozen=True, slots=True)
class SessionCall(JudgeCall):
    """A `JudgeCall` that asks about a whole conversation (its planned transcript), with the same
    retries, timeout and verdict reading as a single run's."""

    transcript: Transcript | None = None

    def request(self, ctx: EvalContext) -> JudgeRequest:
        if self.transcript is None:
            raise ValueError("SessionCall.request needs the transcript planned for this session")
        return build_session_request(self.transcript, criteria=self.criteria, mode=single(self.mode),
                                     guidelines=self.guidelines, include_tools=self.include_tools)
