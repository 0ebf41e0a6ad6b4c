"""The segments page: one evaluator's pass rate (or every evaluator's) broken down by a user, an
agent, a team, a session, a version or any metadata key (a workflow's `workflow_name` or
`step_name`, a plan), each with its 95% (Wilson) interval, worst first; a segment whose interval is
wider than `WIDE` is flagged as too small to tell (its rate may be far from the truth). The store
does the counting (`stores._segments`)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._base.stats import wilson
from ..stores._base import RecordFilter
from ..stores._browse import Browse, for_page
from ..stores._segments import FIELDS, LIMIT, dimension, segments
from .pages import BadRequest, _since, _text, _typed
from .site import Site

FORM = ("by", "evaluator", "agent", "since")
#: an interval wider than this (in pass-rate points, 0-1) says the segment is too small to tell
WIDE = 0.3


class Segments:
    def __init__(self, site: Site) -> None:
        self.site = site

    async def page(self, request: Request) -> Response:
        try:
            by = _text(request, "by") or "user"
            try:
                dimension(by)
            except ValueError as exc:
                raise BadRequest(str(exc), "by") from None
            evaluator, agent, since = _text(request, "evaluator"), _text(request, "agent"), _since(request)
        except BadRequest as exc:
            return self.site.render(request, "segments.html", 400, bad=str(exc), bad_field=exc.field, rows=[],
                                    total=0, shown=LIMIT, dimensions=FIELDS, filters=_typed(request, *FORM))
        store = await for_page(self.site.store)
        found, total = await segments(store, Browse(RecordFilter(evaluator=evaluator, agent_id=agent, since=since)),
                                      by)
        rows: list[dict[str, Any]] = []
        for segment in found:
            interval = wilson(segment.passed, segment.n)
            rows.append({"value": segment.value, "n": segment.n, "passed": segment.passed,
                         "rate": segment.passed / segment.n if segment.n else None, "interval": interval,
                         "wide": interval is None or interval[1] - interval[0] > WIDE})
        rows.sort(key=lambda r: r["rate"] if r["rate"] is not None else 2.0)  # worst first; small ones flagged
        return self.site.render(request, "segments.html", rows=rows, total=total, shown=LIMIT, dimensions=FIELDS,
                                filters={"by": by, "evaluator": evaluator, "agent": agent,
                                         "since": request.query_params.get("since", "")})
