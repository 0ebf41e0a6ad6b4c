"""The failure-modes page: the failed verdicts of an evaluator (the newest `SCANNED`), grouped by
what their reasons say, each group named by its words, counted, with examples. Offline and
deterministic, no model: each reason is a set of words (short and common words left out); a
reason joins the group whose reasons already hold the largest share of its words (at least
`JOIN`), else starts one; a group is named by the words most of its reasons hold. Linear in the
reasons times the groups (at most `MAX_GROUPS`; the rest are counted as "other").

With a `failure_namer` (`judgehooks.ui.app(..., failure_namer="openai/gpt-4o-mini")`), a judge also
names the `NAMED` largest groups (`_judges.naming`), one call per group, remembered by the group's
words: a page waits at most `NAMING_WAIT` seconds for the names, and a name that comes later is
shown from the next load on. A group the judge could not name keeps its words."""

from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._base.log import log
from .._base.record import EvalRecord
from .._base.secrets import scrub
from .._judges.base import Judge
from .._judges.naming import name_group
from .._runtime import runtime
from ..stores._base import RecordFilter
from ..stores._browse import Browse, for_page, page
from .pages import BadRequest, _since, _text, _typed
from .site import Site

SCANNED = 2000
JOIN = 0.5
MAX_GROUPS = 30
EXAMPLES = 3
FORM = ("evaluator", "agent", "since")
#: the groups a judge names (the largest), how long a page waits for their names, and how many names
#: are remembered
NAMED = 10
NAMING_WAIT = 5.0
REMEMBERED = 1000
_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
#: words too common in judges' reasons to tell failures apart
STOP = frozenset("""the and for that this with not are was but has have had its it's from into than then
they them their there what which when where who why how does did doesn don can could would should
answer answers response reply output user question asked ask request requested because also only
very more most much any all some none one two does not fails failed failure passes passed pass fail
criteria criterion judge reason verdict score which while being been were will just about over
under such other another""".split())


@dataclass
class Group:
    words: Counter[str] = field(default_factory=Counter)
    members: list[EvalRecord] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The words most of its reasons hold (at most three, the most frequent first)."""
        return ", ".join(word for word, _ in self.words.most_common(3)) or "(no words)"


def words_of(reason: str | None) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall((reason or "").lower()) if w not in STOP)


def group_failures(records: list[EvalRecord]) -> tuple[list[Group], list[EvalRecord]]:
    """The groups (largest first) and the records left over once `MAX_GROUPS` are full."""
    groups: list[Group] = []
    other: list[EvalRecord] = []
    for record in records:
        words = words_of(record.reason)
        best, best_score = None, 0.0
        for i, group in enumerate(groups):
            # the share of this reason's words the group's reasons already hold (a reason without
            # words joins the group of reasons without words)
            score = (sum(w in group.words for w in words) / len(words)) if words else float(not group.words)
            if score > best_score:
                best, best_score = i, score
        if best is not None and best_score >= JOIN:
            groups[best].members.append(record)
            groups[best].words.update(words)
        elif len(groups) < MAX_GROUPS:
            groups.append(Group(Counter(words), [record]))
        else:
            other.append(record)
    return sorted(groups, key=lambda g: (-len(g.members), g.name)), other


class Namer:
    """A judge naming groups, each once: names remembered by the group's words; a call in flight is
    never made twice. The calls run on the judgehooks loop, so one a page stopped waiting for still
    ends, and its name is there on the next load."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self._names: OrderedDict[str, str | None] = OrderedDict()
        self._asked: dict[str, None] = {}  # the groups being named now
        self._lock = threading.Lock()

    async def names(self, groups: list[Group]) -> dict[str, str]:
        """The judge's name of each group it has named (by the group's word name), waiting up to
        `NAMING_WAIT` seconds for the ones asked now."""
        asking = []
        with self._lock:  # reserved here, asked below: a call may end (and take the lock) as it starts
            for group in groups[:NAMED]:
                if group.name not in self._names and group.name not in self._asked:
                    self._asked[group.name] = None
                    asking.append((group.name, [r.reason or "" for r in group.members]))
        waiting = [runtime.submit(self._ask, key, reasons) for key, reasons in asking]
        if waiting:
            await asyncio.wait([asyncio.wrap_future(f) for f in waiting], timeout=NAMING_WAIT)
        with self._lock:
            return {key: name for key, name in self._names.items() if name is not None}

    async def _ask(self, key: str, reasons: list[str]) -> None:
        try:
            name = await name_group(self.judge, reasons)
        except Exception as exc:  # the judge is down: the group keeps its words (and is asked again later)
            log.warning("failure_naming_failed", model=getattr(self.judge, "model", None),
                        error_type=type(exc).__name__, error=scrub(str(exc))[:300])
            with self._lock:
                self._asked.pop(key, None)
            return
        with self._lock:
            self._asked.pop(key, None)
            self._names[key] = name
            while len(self._names) > REMEMBERED:
                self._names.popitem(last=False)


class Failures:
    def __init__(self, site: Site, namer: Judge | None = None) -> None:
        self.site = site
        self.namer = None if namer is None else Namer(namer)

    async def page(self, request: Request) -> Response:
        try:
            evaluator, agent, since = _text(request, "evaluator"), _text(request, "agent"), _since(request)
        except BadRequest as exc:
            return self.site.render(request, "failures.html", 400, bad=str(exc), bad_field=exc.field, groups=[],
                                    other=0, scanned=0, limit=SCANNED, filters=_typed(request, *FORM))
        store = await for_page(self.site.store)
        failed = await page(store, Browse(RecordFilter(status="failed", evaluator=evaluator, agent_id=agent,
                                                       since=since)), limit=SCANNED)
        groups, other = group_failures([r for r in failed if r.rejudge_of is None and r.scope != "health"])
        named = {} if self.namer is None else await self.namer.names(groups)
        shown: list[dict[str, Any]] = [{"name": named.get(g.name) or g.name,
                                        "words": g.name if g.name in named else None,
                                        "count": len(g.members), "examples": g.members[:EXAMPLES],
                                        "evaluators": sorted({r.evaluator for r in g.members})} for g in groups]
        return self.site.render(request, "failures.html", groups=shown, other=len(other), scanned=len(failed),
                                namer=None if self.namer is None else getattr(self.namer.judge, "model", "a judge"),
                                limit=SCANNED, filters={"evaluator": evaluator, "agent": agent,
                                                        "since": request.query_params.get("since", "")})
