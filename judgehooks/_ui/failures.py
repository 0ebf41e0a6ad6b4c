"""The failure-modes page: the failed verdicts of an evaluator (the newest `SCANNED`), grouped by
what their reasons say, each group named by its words, counted, with examples. Offline and
deterministic, no model: each reason is a set of words (short and common words left out); a
reason joins the group whose reasons already hold the largest share of its words (at least
`JOIN`), else starts one; a group is named by the words most of its reasons hold. Linear in the
reasons times the groups (at most `MAX_GROUPS`; the rest are counted as "other")."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._base.record import EvalRecord
from ..stores._base import RecordFilter
from ..stores._browse import Browse, for_page, page
from .pages import BadRequest, _since, _text, _typed
from .site import Site

SCANNED = 2000
JOIN = 0.5
MAX_GROUPS = 30
EXAMPLES = 3
FORM = ("evaluator", "agent", "since")
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


class Failures:
    def __init__(self, site: Site) -> None:
        self.site = site

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
        shown: list[dict[str, Any]] = [{"name": g.name, "count": len(g.members), "examples": g.members[:EXAMPLES],
                                        "evaluators": sorted({r.evaluator for r in g.members})} for g in groups]
        return self.site.render(request, "failures.html", groups=shown, other=len(other), scanned=len(failed),
                                limit=SCANNED, filters={"evaluator": evaluator, "agent": agent,
                                                        "since": request.query_params.get("since", "")})
