"""The compare page: two versions of one evaluator, two agents or two time windows side by side:
each side's pass rate with its 95% (Wilson) interval, their score histograms on one axis, and the
runs both sides judged whose verdict changed. The store does the counting (`stores._compare`)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._base.stats import wilson
from .._base.when import parse_when
from ..stores._base import RecordFilter
from ..stores._browse import Browse, for_page, tallies
from ..stores._compare import Counts, changes, counts, histograms
from .chart import histogram as draw_histogram
from .pages import BadRequest, _since, _text, _typed
from .site import Site

#: what may be compared, as the form's ``by`` offers it
MODES = {"version": "two versions of one evaluator", "agent": "two agents", "window": "two time windows"}
FIELDS = ("by", "evaluator", "agent", "a", "b", "since")
#: the changed verdicts listed (the newest; the page says how many there are in all)
CHANGES = 100


class Compare:
    def __init__(self, site: Site) -> None:
        self.site = site

    async def page(self, request: Request) -> Response:
        try:
            asked = _asked(request)
        except BadRequest as exc:
            return self.site.render(request, "compare.html", 400, bad=str(exc), bad_field=exc.field, result=None,
                                    suggestions=[], modes=MODES, filters=_typed(request, *FIELDS))
        store = await for_page(self.site.store)
        if asked is None:  # nothing asked yet: the form, and the evaluators that have several versions
            return self.site.render(request, "compare.html", result=None, modes=MODES,
                                    suggestions=await _suggestions(store), filters=_typed(request, *FIELDS))
        by, names, sides, links = asked
        # the store's questions at once: PostgreSQL answers them on several connections
        tallied_a, tallied_b, counted, overlap = await asyncio.gather(
            counts(store, sides[0]), counts(store, sides[1]), histograms(store, sides),
            changes(store, sides[0], sides[1], limit=CHANGES))
        tallied = [tallied_a, tallied_b]
        drawn = table = None
        if counted is not None:
            cut, (a, b) = counted
            labels = cut.labels()
            drawn = draw_histogram(labels, a, b, names)
            table = [{"bucket": text, "a": a[i], "b": b[i], "a_share": a[i] / (sum(a) or 1),
                      "b_share": b[i] / (sum(b) or 1)} for i, text in enumerate(labels)]
        rates = [_rate(c) for c in tallied]
        result = {"sides": [{"side": side, "name": name, "counts": c, **rate, "link": link}
                            for side, name, c, rate, link in zip("AB", names, tallied, rates, links, strict=True)],
                  "difference": (rates[1]["rate"] - rates[0]["rate"]
                                 if rates[0]["rate"] is not None and rates[1]["rate"] is not None else None),
                  "overlapping": _overlapping(rates[0]["interval"], rates[1]["interval"]),
                  "histogram": drawn, "table": table, "overlap": overlap, "shown": CHANGES, "by": by}
        return self.site.render(request, "compare.html", result=result, suggestions=[], modes=MODES,
                                filters=_typed(request, *FIELDS))


def _asked(request: Request) -> tuple[str, tuple[str, str], list[Browse], list[dict[str, Any] | None]] | None:
    """What the query string asks to compare: the mode, the sides' names, the sides, and each side's
    filters on the records page (None where that page cannot show it); None when it asks nothing."""
    if not any(request.query_params.get(name, "").strip() for name in FIELDS):
        return None
    by = _text(request, "by") or "version"
    if by not in MODES:
        raise BadRequest(f"by must be one of {', '.join(MODES)}, got {by[:40]!r}", "by")
    evaluator, agent, since = _text(request, "evaluator"), _text(request, "agent"), _since(request)
    a, b = _text(request, "a"), _text(request, "b")
    what = {"version": "a version of the evaluator (e.g. v1)", "agent": "an agent id",
            "window": "a time window, FROM..TO (e.g. 14d..7d, or 7d.. for the last 7 days)"}[by]
    if a is None or b is None:
        name = "a" if a is None else "b"
        raise BadRequest(f"{name}: name side {name.upper()}: {what}", name)
    if a == b:
        raise BadRequest(f"b names the same {'window' if by == 'window' else by} as a ({a[:60]!r}): "
                         "compare two different ones", "b")
    if by == "version":
        if evaluator is None:
            raise BadRequest("evaluator: name the evaluator whose versions to compare", "evaluator")
        where = RecordFilter(evaluator=evaluator, agent_id=agent, since=since)
        sides = [Browse(where, version=a), Browse(where, version=b)]
        links: list[dict[str, Any] | None] = [{"evaluator": evaluator, "agent": agent, "version": v,
                                               "since": request.query_params.get("since")} for v in (a, b)]
    elif by == "agent":
        if agent is not None:
            raise BadRequest("agent: comparing two agents, name them in A and B", "agent")
        sides = [Browse(RecordFilter(agent_id=v, evaluator=evaluator, since=since)) for v in (a, b)]
        links = [{"evaluator": evaluator, "agent": v, "since": request.query_params.get("since")} for v in (a, b)]
    else:
        if since is not None:
            raise BadRequest("since: comparing two windows, give each its times in A and B (e.g. 14d..7d)", "since")
        sides = [Browse(RecordFilter(evaluator=evaluator, agent_id=agent, since=start, until=end))
                 for start, end in (_window("a", a), _window("b", b))]
        links = [None, None]  # the records page filters by since, not by until
    return by, (a, b), sides, links


def _window(name: str, value: str) -> tuple[datetime, datetime | None]:
    """``FROM..TO`` (each a duration ago or an ISO time; ``FROM..`` or ``FROM`` alone: until now)."""
    start, _, end = value.partition("..")
    try:
        since = parse_when(start)
        until = parse_when(end) if end.strip() else None
    except ValueError as exc:
        raise BadRequest(f"{name}: a window is FROM..TO (e.g. 14d..7d): {exc}", name) from None
    if until is not None and until <= since:
        raise BadRequest(f"{name}: the window ends before it starts ({value[:60]!r}): FROM is the earlier time, "
                         "e.g. 14d..7d", name)
    return since, until


def _rate(c: Counts) -> dict[str, Any]:
    return {"rate": c.passed / c.verdicts if c.verdicts else None, "interval": wilson(c.passed, c.verdicts)}


def _overlapping(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool | None:
    return None if a is None or b is None else a[0] <= b[1] and b[0] <= a[1]


async def _suggestions(store: Any) -> list[dict[str, Any]]:
    """Each evaluator graded by several versions, with its newest two (by when each was first seen)."""
    seen: dict[str, dict[str, datetime]] = {}
    for t in await tallies(store, Browse(judged=True)):
        evaluator, version = t.key[0], t.key[1]
        if version is not None and t.first is not None:
            firsts = seen.setdefault(evaluator, {})
            firsts[version] = min(firsts.get(version, t.first), t.first)
    found = []
    for evaluator, firsts in sorted(seen.items()):
        if len(firsts) > 1:
            older, newer = sorted(firsts, key=lambda v: firsts[v])[-2:]
            found.append({"evaluator": evaluator, "a": older, "b": newer, "versions": len(firsts)})
    return found
