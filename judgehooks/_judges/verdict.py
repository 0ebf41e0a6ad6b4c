"""Reading a judge's reply into a Verdict. Pure, tolerant of the shapes real models produce, and
never fooled by a verdict the judge merely quotes.

A reply that is one JSON object (structured output) is the verdict. Otherwise every verdict in the
reply is a candidate: a JSON object with the key, or a labelled line (`SCORE:`, `PASSED:`). A judge
often quotes the answer it grades before it gives its own verdict, and the answer may carry a
forged verdict, so the candidates are ranked:

1. a verdict carrying the prompt's nonce (its JSON ``"nonce"`` field, its own line, or the verdict a
   ``NONCE:`` line stands beside): the answer cannot know the nonce, so only the judge wrote it; the
   last one wins. A ``NONCE:`` line signs the nearest verdict before it (the prompt's order), unless
   a verdict follows right after it: then the judge wrote the nonce first, and it signs that one only
   when no verdict precedes it (a quoted forgery there would be as close), else none;
2. verdicts outside quoted material (the prompt's nonce fences, markdown code fences, ``>``
   quotes, a verdict that opens with a quotation mark): they must all agree;
3. verdicts inside markdown code fences (judges put their JSON there): they must all agree.
   A fenced verdict after a plain one counts as plain (rank 2): a ``` line of the quoted answer can
   end the judge's code quote or open a fence around the judge's own verdict.

Verdicts in the nonce fences, in ``>`` quotes or inside quotation marks never count, nor does a JSON
verdict carrying a nonce that is not the prompt's (a guess: a forgery), whether it is the whole reply
or a part of it. Verdicts that
disagree, with no nonce to tell the judge's own, raise `MalformedVerdict`, as does a reply with no
verdict: the core turns it into an `error` record after retries, never a pass or a fail.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any

from .._base.record import JudgeMode
from .._base.text import lazy_pattern
from ..exceptions import MalformedVerdict

_SCORE_LINE = lazy_pattern(r"^([^\w\n]*)(score)\W*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE | re.MULTILINE)
_PASSED_LINE = lazy_pattern(r"^([^\w\n]*)(passed|pass|verdict|result)\W*[:=]\s*\**\s*(\w+)",
                          re.IGNORECASE | re.MULTILINE)
_WINNER_LINE = lazy_pattern(r"^([^\w\n]*)(winner|better)\W*[:=]\s*\**\s*(\w+)", re.IGNORECASE | re.MULTILINE)
_REASON_LINE = lazy_pattern(r"\b(?:reasoning|reason)\W*[:=]\s*(.+)", re.IGNORECASE)
# The prompt's fences (prompt.py), echoed by a judge: what is inside is the run's data.
_NONCE_FENCE = lazy_pattern(r"<<<(?!END-)([A-Z-]+)-([0-9a-f]+)>>>.*?(?:<<<END-\1-\2>>>|\Z)", re.DOTALL)
_FENCE_MARKER = lazy_pattern(r"<<<(?:END-)?[A-Z-]+-[0-9a-f]+>>>")


def _fences(nonce: str | None) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The prompt's fences and their markers: with the nonce known, only fences that carry it (an
    answer that writes ``<<<OUTPUT-0>>>`` cannot make the judge's own verdict look quoted)."""
    if nonce is None:
        return _NONCE_FENCE, _FENCE_MARKER
    n = re.escape(nonce)
    return (re.compile(rf"<<<(?!END-)([A-Z-]+)-{n}>>>.*?(?:<<<END-\1-{n}>>>|\Z)", re.DOTALL),
            re.compile(rf"<<<(?:END-)?[A-Z-]+-{n}>>>"))
_CODE_FENCE = lazy_pattern(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_BLOCKQUOTE = lazy_pattern(r"^[ \t]*>.*$", re.MULTILINE)
_QUOTES = frozenset("\"'`“”‘’«»")
#: the longest reply searched for a verdict: the search costs more than its length (a failed JSON decode
#: at each brace counts the lines before it), and a verdict fits in far less (a reply of one JSON object
#: is read at any length)
MAX_SEARCHED_CHARS = 32_000
_TRUE = {"true", "yes", "pass", "passed", "1"}
_FALSE = {"false", "no", "fail", "failed", "0"}


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool | None  # binary verdicts only; numeric ones are thresholded by the evaluator
    score: int | None
    reason: str
    choice: str | None = None  # pairwise verdicts only: "A", "B" or "tie" (which answer is better)


#: the key a verdict of each mode carries
KEYS: dict[str, str] = {"numeric": "score", "binary": "passed", "pairwise": "winner"}
_CHOICES = {"a": "A", "b": "B", "tie": "tie", "equal": "tie", "draw": "tie", "neither": "tie", "both": "tie"}


@dataclass(frozen=True, slots=True)
class _Candidate:
    start: int
    end: int
    value: Any  # the raw score / passed value, checked only if this candidate is chosen
    reason: str | None  # a JSON verdict's own reason; None for a labelled line
    signed: bool  # carries the nonce itself
    quoted: bool  # in a nonce fence, a > quote, or inside quotation marks: never the judge's own
    fenced: bool  # in a markdown code fence: the judge's own only when nothing better is there


def _json_objects(text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Every top-level JSON object embedded in text, in order, with its span."""
    found, decoder, i = [], json.JSONDecoder(), text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested past Python's stack
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append((i, end, obj))
        i = text.find("{", end)
    return found


def _as_score(value: Any) -> int:
    try:
        number = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int no float holds
        number = math.nan
    if not number.is_integer() or not 1 <= number <= 10:
        raise MalformedVerdict(f"score must be an integer 1-10, got {value!r}")
    return int(number)


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise MalformedVerdict(f"passed must be true or false, got {value!r}")


def _as_choice(value: Any) -> str:
    word = value.strip().lower() if isinstance(value, str) else None
    if word not in _CHOICES:
        raise MalformedVerdict(f"winner must be \"A\", \"B\" or \"tie\", got {value!r}")
    return _CHOICES[word]


def _verdict(value: Any, reason: str, mode: JudgeMode) -> Verdict:
    if mode == "pairwise":
        return Verdict(passed=None, score=None, reason=reason, choice=_as_choice(value))
    if mode == "numeric":
        return Verdict(passed=None, score=_as_score(value), reason=reason)
    return Verdict(passed=_as_bool(value), score=None, reason=reason)


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


def _inside(spans: list[tuple[int, int]], start: int) -> bool:
    return any(a <= start < b for a, b in spans)


def _opens_quote(text: str, start: int) -> bool:
    """Whether the text before `start` on its line is a > quote or leaves a quotation open."""
    prefix = text[text.rfind("\n", 0, start) + 1:start].strip()
    if not prefix:
        return False
    return (prefix.startswith(">") or prefix[-1] in _QUOTES or prefix.count('"') % 2 == 1
            or prefix.count("`") % 2 == 1 or prefix.count("“") > prefix.count("”")
            or prefix.count("«") > prefix.count("»"))


def _quoted_label(text: str, match: re.Match[str]) -> bool:
    """Whether a labelled line opens with a quotation mark; `"passed": true` (a JSON key, e.g. of a
    reply cut off before its JSON closed) does not count as one."""
    prefix = match.group(1)
    if prefix and prefix[-1] in _QUOTES and text[match.end(2):match.end(2) + 1] == prefix[-1]:
        prefix = prefix[:-1]
    return bool(_QUOTES & set(prefix))


def _wrong_nonce(obj: dict[str, Any], nonce: str | None) -> bool:
    """A JSON verdict that carries a nonce other than the prompt's: written by someone who had to guess it."""
    return nonce is not None and "nonce" in obj and str(obj["nonce"]).strip() != nonce


def _candidates(text: str, mode: JudgeMode, nonce: str | None) -> list[_Candidate]:
    key = KEYS[mode]
    fence, marker = _fences(nonce)
    nonce_fenced = _spans(fence, text)
    code_fenced = _spans(_CODE_FENCE, text)
    quoted_lines = _spans(_BLOCKQUOTE, text)
    found: list[_Candidate] = []
    objects = [(a, b, obj) for a, b, obj in _json_objects(text) if key in obj]
    for start, end, obj in objects:
        found.append(_Candidate(
            start, end, obj[key], str(obj.get("reason") or obj.get("reasoning") or ""),
            signed=nonce is not None and str(obj.get("nonce", "")).strip() == nonce,
            quoted=_inside(nonce_fenced, start) or _inside(quoted_lines, start) or _opens_quote(text, start)
            or _wrong_nonce(obj, nonce),
            fenced=_inside(code_fenced, start)))
    line_pattern = {"numeric": _SCORE_LINE, "binary": _PASSED_LINE, "pairwise": _WINNER_LINE}[mode]
    for match in line_pattern.finditer(text):
        start = match.start()
        if any(a <= start < b for a, b, _ in objects):
            continue  # the line of a JSON verdict already counted
        line_end = text.find("\n", start)
        line = text[start:line_end if line_end != -1 else len(text)]
        found.append(_Candidate(
            start, match.end(), match.group(3), None,
            signed=nonce is not None and nonce in marker.sub("", line),
            quoted=_inside(nonce_fenced, start) or _inside(quoted_lines, start) or _quoted_label(text, match),
            fenced=_inside(code_fenced, start)))
    found.sort(key=lambda c: c.start)
    return _sign_by_nonce_lines(text, found, nonce, nonce_fenced, marker)


def _sign_by_nonce_lines(text: str, found: list[_Candidate], nonce: str | None,
                         fenced: list[tuple[int, int]], marker: re.Pattern[str]) -> list[_Candidate]:
    """A nonce the judge wrote on its own (e.g. `NONCE: ...`) signs the nearest verdict before it, or
    the verdict right after it when the judge wrote the nonce first and no verdict precedes it; with
    verdicts on both sides and one right after, it signs none (which one is quoted cannot be told)."""
    if nonce is None:
        return found
    markers = _spans(marker, text)
    signed = list(found)
    for match in re.finditer(re.escape(nonce), text):
        at = match.start()
        if _inside(fenced, at) or _inside(markers, at) or any(c.start <= at < c.end for c in found):
            continue  # inside the data, an echoed fence marker, or a verdict that carries it itself
        before = [i for i, c in enumerate(signed) if c.end <= at and not c.quoted]
        after = [i for i, c in enumerate(signed) if c.start >= match.end() and not c.quoted]
        if after and _adjacent(text, match.end(), signed[after[0]].start):
            if before:
                continue  # the nonce opens a verdict, and another stands before it: sign neither
            chosen = after[0]
        elif before:
            chosen = before[-1]
        else:
            continue
        signed[chosen] = replace(signed[chosen], signed=True)
    return signed


def _adjacent(text: str, start: int, end: int) -> bool:
    """Whether only the judge's own furniture stands between a nonce and the verdict after it: its
    REASONING line and a word or two ("Sure."), no sentence that could introduce a quotation."""
    gap = _REASON_LINE.sub("", text[start:end])
    return len(re.sub(r"[\s*_`:#>-]+", "", gap)) <= 12


def _reason_near(text: str, candidate: _Candidate, nonce: str | None) -> str:
    """A labelled verdict's reason: the last REASONING line before it, else the first after it,
    outside the quoted material the verdict itself is outside of."""
    excluded = _spans(_fences(nonce)[0], text) + _spans(_BLOCKQUOTE, text)
    lines = [m for m in _REASON_LINE.finditer(text) if not _inside(excluded, m.start())]
    before = [m for m in lines if m.start() < candidate.start]
    after = [m for m in lines if m.start() >= candidate.end]
    chosen = before[-1] if before else (after[0] if after else None)
    return chosen.group(1).strip() if chosen else ""


def _normal(value: Any, mode: JudgeMode) -> Any:
    """What a candidate's value means, so that "true" and "yes" agree; an unreadable value is its own."""
    try:
        return _verdict(value, "", mode)
    except MalformedVerdict:
        return repr(value)


def _agreeing(group: list[_Candidate], mode: JudgeMode, where: str) -> _Candidate:
    if len({_normal(c.value, mode) for c in group}) > 1:
        shown = sorted({str(c.value) for c in group})
        raise MalformedVerdict(f"judge reply has conflicting verdicts {where} ({', '.join(shown)}) and none carries "
                               f"the nonce, so its own verdict cannot be told from a quoted one")
    return group[-1]


def parse_verdict(text: str | None, mode: JudgeMode, *, nonce: str | None = None) -> Verdict:
    """Parse a judge reply for `mode`; raise MalformedVerdict naming what was wrong.

    `nonce` is the one the prompt fenced the run with (`JudgeRequest.nonce`): a verdict carrying it
    is the judge's own."""
    if not text or not text.strip():
        raise MalformedVerdict("judge reply is empty")
    key = KEYS[mode]
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, dict) and key in whole:  # structured output: the reply is the verdict
        if _wrong_nonce(whole, nonce):
            raise MalformedVerdict("judge reply is a verdict carrying a nonce that is not the prompt's: a forged "
                                   "verdict, not the judge's own")
        return _verdict(whole[key], str(whole.get("reason") or whole.get("reasoning") or ""), mode)
    if len(text) > MAX_SEARCHED_CHARS:
        raise MalformedVerdict(f"judge reply is {len(text)} characters and not one JSON verdict: a verdict is "
                               f"searched for in replies of at most {MAX_SEARCHED_CHARS} characters")
    found = _candidates(text, mode, nonce)
    signed = [c for c in found if c.signed]
    plain = [c for c in found if not c.quoted and not c.fenced]
    in_code = [c for c in found if not c.quoted and c.fenced]
    if plain and in_code and in_code[-1].start > plain[0].start:
        plain = [c for c in found if not c.quoted]  # a fence after a plain verdict: the quoted answer may open it
    if signed:
        chosen = signed[-1]
    elif plain:
        chosen = _agreeing(plain, mode, "outside quoted material")
    elif in_code:
        chosen = _agreeing(in_code, mode, "in code blocks")
    else:
        snippet = text.strip().replace("\n", " ")[:120]
        if found:
            raise MalformedVerdict(f"judge reply has a {key!r} only inside quoted material: {snippet!r}")
        raise MalformedVerdict(f"judge reply has no {key!r} (not JSON, no {key.upper()}: line): {snippet!r}")
    reason = chosen.reason if chosen.reason is not None else _reason_near(text, chosen, nonce)
    return _verdict(chosen.value, reason, mode)
