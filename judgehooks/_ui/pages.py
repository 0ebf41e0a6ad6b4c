"""The page handlers: each reads the query string (checked), asks the store through the public
functions and `stores._browse`, and renders a template. Filtering and paging happen in the store.
A query value the page cannot use is a 400 that names the parameter, shown above the page's own
form with what was typed in it, to correct it there."""

from __future__ import annotations

import random
import re
from collections.abc import Collection
from typing import Any, cast

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from .._alerts.calibration import acalibrate_all
from .._base.feedback import Feedback
from .._base.label import Label
from .._base.record import STATUSES, EvalRecord
from .._base.session import Turn
from .._base.when import parse_when
from .._hooks.agnodb import aread_session
from .._optimize.shadowreport import ashadow_report
from ..stores._base import RecordFilter, Store
from ..stores._browse import SORTS, Browse, Sort, for_page, page, tallies
from ..stores._human import FAIL_KEY, PASS_KEY, SKIP_KEY, alabel
from ..stores._search import SearchError
from .conversation import conversation
from .guard import CSRF_FIELD, csrf_token, read_form, set_csrf_cookie
from .overview import BUCKETS, draw, scores, tally_row
from .site import Site

PAGE = 50
#: the largest page number a link may ask for (an offset the store can still reach quickly)
MAX_PAGE = 10_000
QUEUES = ("routed", "failed", "borderline", "sample")
#: how many records a review queue looks through for one that nobody here labelled yet
SCANNED = 2000
MAX_SKIPPED = 200
#: a page number as a link writes it: ASCII digits only ("²".isdigit() is True, int("²") fails)
_WHOLE = re.compile(r"[0-9]{1,9}")
#: how much of a bad value is written back into the form
SHOWN = 1000
class BadRequest(Exception):
    """A query string the page cannot use: shown to the person, status 400, beside `field` (the
    parameter's form field) when the page has one."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _text(request: Request, name: str, limit: int = 200) -> str | None:
    value = request.query_params.get(name, "").strip()
    if len(value) > limit:
        raise BadRequest(f"{name} is longer than {limit} characters", name)
    if "\x00" in value:  # no id holds one (PostgreSQL text cannot)
        raise BadRequest(f"{name} holds a NUL character", name)
    return value or None


def _typed(request: Request, *names: str) -> dict[str, str]:
    """What the query string holds for the form's fields, as typed (to write back into the form)."""
    return {name: request.query_params.get(name, "")[:SHOWN] for name in names}


def _since(request: Request) -> Any:
    value = _text(request, "since")
    if value is None or value == "all":
        return None
    try:
        return parse_when(value)
    except ValueError as exc:
        raise BadRequest(f"since: {exc}", "since") from None


def _page_number(request: Request) -> int:
    value = request.query_params.get("page", "1")
    if not _WHOLE.fullmatch(value) or not 1 <= int(value) <= MAX_PAGE:
        raise BadRequest(f"page must be a whole number from 1 to {MAX_PAGE}, got {value[:20]!r}", "page")
    return int(value)


def _choice(request: Request, name: str, allowed: Collection[str]) -> str | None:
    value = _text(request, name)
    if value is not None and value not in allowed:
        raise BadRequest(f"{name} must be one of {', '.join(allowed)}, got {value[:40]!r}", name)
    return value


def _meta(request: Request) -> tuple[tuple[str, str], ...]:
    """The metadata filter, ``key=value``: records whose metadata holds that key with that value."""
    value = _text(request, "meta", 500)
    if value is None:
        return ()
    key, sep, wanted = value.partition("=")
    key = key.strip()
    if not sep or not key or '"' in key or "\\" in key:
        raise BadRequest(f"meta takes key=value (e.g. plan=pro), a key without '\"' or '\\\\', got {value[:60]!r}",
                         "meta")
    return ((key, wanted.strip()),)


class Pages:
    def __init__(self, site: Site) -> None:
        self.site = site

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self.site.render(request, "message.html", 404, title="Not found",
                                message=getattr(exc, "detail", None) or "No such page.")

    async def failed(self, request: Request, exc: Exception) -> Response:
        return self.site.render(request, "message.html", 500, title="The store could not be read",
                                message=f"{type(exc).__name__}: {str(exc)[:500]}")

    async def _latest(self, store: Store | None = None) -> str | None:
        """What the live pages compare to see a new record (the newest record's time and id, "" for an
        empty store), or None when the pages do not look (``live_every=0``)."""
        if not self.site.live_every:
            return None
        newest = await page(store or self.site.store, Browse(), limit=1)
        return f"{newest[0].created_at.isoformat()} {newest[0].id}" if newest else ""

    async def latest(self, request: Request) -> Response:
        """``/api/latest``: the marker of the newest record, which a live page polls (never cached)."""
        return JSONResponse({"latest": await self._latest()}, headers={"Cache-Control": "no-store"})

    def _bad(self, request: Request, exc: BadRequest) -> Response:
        return self.site.render(request, "message.html", 400, title="Bad request", message=str(exc))

    # ---- overview ---------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        try:
            agent, evaluator, since = _text(request, "agent"), _text(request, "evaluator"), _since(request)
            asked = request.query_params.get("bucket", "auto")
            if asked not in ("auto", *BUCKETS):
                raise BadRequest(f"bucket must be auto, {', '.join(BUCKETS)}", "bucket")
        except BadRequest as exc:
            return self.site.render(request, "overview.html", 400, bad=str(exc), bad_field=exc.field, rows=[],
                                    charts=[], run_charts=[], scores=None, bucket="auto",
                                    filters=_typed(request, "agent", "evaluator", "since"))
        browse = Browse(RecordFilter(agent_id=agent, evaluator=evaluator, since=since))
        store = await for_page(self.site.store)
        groups = await tallies(store, browse)
        rows = sorted((tally_row(t) for t in groups), key=lambda r: (r["target"], r["evaluator"], r["first"] or 0))
        bucket, charts, run_charts = await draw(store, browse, groups, asked, since)
        histogram = await scores(store, browse, groups) if groups else None
        return self.site.render(request, "overview.html", rows=rows, charts=charts, bucket=bucket,
                                run_charts=run_charts, scores=histogram,
                                live=await self._latest(store), filters={"agent": agent, "evaluator": evaluator,
                                         "since": request.query_params.get("since", "")})

    # ---- records ----------------------------------------------------------------------------

    async def records(self, request: Request) -> Response:
        fields = ("q", "status", "agent", "user", "evaluator", "version", "session", "meta", "since", "sort",
                  "order")
        try:
            status = _text(request, "status")
            if status is not None and status not in STATUSES:
                raise BadRequest(f"status must be one of {', '.join(STATUSES)}", "status")
            filters = {name: _text(request, name) for name in ("agent", "user", "evaluator", "version", "session")}
            text, meta = _text(request, "q", 500), _meta(request)
            sort, order = _choice(request, "sort", SORTS), _choice(request, "order", ("desc", "asc"))
            since, number = _since(request), _page_number(request)
            try:
                browse = Browse(RecordFilter(agent_id=filters["agent"], evaluator=filters["evaluator"], status=status,
                                             since=since), version=filters["version"],
                                session_id=filters["session"], user_id=filters["user"], text=text,
                                metadata=meta)
            except SearchError as exc:
                raise BadRequest(str(exc), "q") from None
        except BadRequest as exc:
            return self.site.render(request, "records.html", 400, bad=str(exc), bad_field=exc.field, records=[],
                                    number=1, more=False, statuses=STATUSES, sorts=SORTS,
                                    filters=_typed(request, *fields))
        store = await for_page(self.site.store)
        try:
            found = await page(store, browse, offset=(number - 1) * PAGE, limit=PAGE + 1,
                               sort=cast(Sort, sort or "time"), ascending=order == "asc")
        except SearchError as exc:  # the index refused the words: said at the search field, not a 500
            return self.site.render(request, "records.html", 400, bad=str(exc), bad_field="q", records=[],
                                    number=1, more=False, statuses=STATUSES, sorts=SORTS,
                                    filters=_typed(request, *fields))
        typed = {"q": text, "meta": request.query_params.get("meta", "").strip() or None, "sort": sort,
                 "order": order, "since": request.query_params.get("since", "")}
        return self.site.render(request, "records.html", records=found[:PAGE], number=number,
                                more=len(found) > PAGE, statuses=STATUSES, sorts=SORTS,
                                live=await self._latest(store) if number == 1 else None,
                                filters={**filters, "status": status, **typed},
                                feedback=await self._feedback_said({r.run_id for r in found[:PAGE] if r.run_id}))

    async def _feedback_said(self, run_ids: set[str]) -> dict[str, str]:
        """What end users said about each of these runs, in a few characters (one query for the page)."""
        try:
            given = await self.site.store.read_feedback(run_ids) if run_ids else []
        except NotImplementedError:
            return {}
        said: dict[str, list[Feedback]] = {}
        for item in given:
            said.setdefault(item.run_id, []).append(item)
        return {run: _said(items) for run, items in said.items()}

    async def record(self, request: Request) -> Response:
        record_id = request.path_params["record_id"]
        found = await self.site.store.records_by_id([record_id]) if len(record_id) <= 200 else []
        if not found:
            raise HTTPException(404, "No record with this id in the store.")
        record = found[0]
        return self.site.render(request, "record.html", record=record, labels=await self._labels(record.id),
                                feedback=await self._feedback(record.run_id), tool_calls=_tool_calls(record))

    async def _feedback(self, run_id: str | None) -> list[Feedback]:
        """End users' feedback on the run, newest first (none for a store that keeps none)."""
        if run_id is None:
            return []
        try:
            return list(reversed(await self.site.store.read_feedback([run_id])))
        except NotImplementedError:
            return []

    async def _labels(self, record_id: str | None = None) -> list[Label]:
        try:
            labels = list(await self.site.store.read_labels())
        except NotImplementedError:
            return []
        return [lb for lb in labels if record_id is None or lb.record_id == record_id]

    # ---- sessions ---------------------------------------------------------------------------

    async def sessions(self, request: Request) -> Response:
        try:
            number, since = _page_number(request), _since(request)
        except BadRequest as exc:
            return self.site.render(request, "sessions.html", 400, bad=str(exc), bad_field=exc.field, records=[],
                                    number=1, more=False,
                                    filters=_typed(request, "since"))
        found = await page(await for_page(self.site.store), Browse(RecordFilter(since=since), scope="session"),
                           offset=(number - 1) * PAGE, limit=PAGE + 1)
        return self.site.render(request, "sessions.html", records=found[:PAGE], number=number,
                                more=len(found) > PAGE, filters={"since": request.query_params.get("since", "")})

    async def session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        found = await page(await for_page(self.site.store), Browse(session_id=session_id), limit=1000) \
            if len(session_id) <= 200 else []
        stored: tuple[Turn, ...] = ()
        problem = None
        if self.site.agno_db is not None and len(session_id) <= 200:
            try:
                stored = await aread_session(self.site.agno_db, session_id, redact=self.site.redact)
            except Exception as exc:  # agno's db is down or unreadable: the records still show
                problem = f"agno's db could not be read: {type(exc).__name__}: {str(exc)[:300]}"
        if not found and not stored:
            raise HTTPException(404, "No record of this session in the store" + (
                "." if self.site.agno_db is None else ", and no such session in agno's db."))
        graded = [r for r in found if r.scope == "session"]
        return self.site.render(request, "session.html", session_id=session_id, graded=graded,
                                turns=conversation(found, graded, stored), from_db=self.site.agno_db is not None,
                                problem=problem)

    # ---- calibration ------------------------------------------------------------------------

    async def calibration(self, request: Request) -> Response:
        try:
            wanted = _text(request, "evaluator")
        except BadRequest as exc:
            return self.site.render(request, "calibration.html", 400, bad=str(exc), bad_field=exc.field, results=[],
                                    problem=None,
                                    filters=_typed(request, "evaluator"))
        results, problem = [], None
        try:  # one count, the labels and the records they label: never every record once per version
            results = await acalibrate_all(await for_page(self.site.store), evaluator=wanted, resamples=1000)
        except NotImplementedError as exc:  # a store that keeps no labels
            problem = str(exc)
        return self.site.render(request, "calibration.html", results=results, problem=problem,
                                filters={"evaluator": wanted})

    # ---- shadow ------------------------------------------------------------------------------

    async def shadow(self, request: Request) -> Response:
        """A Shadow's report (`shadow_report`): the decision, the totals and the segments."""
        try:
            name = _text(request, "name")
            by = _text(request, "by")
        except BadRequest as exc:
            return self.site.render(request, "shadow.html", 400, bad=str(exc), bad_field=exc.field, report=None,
                                    filters=_typed(request, "name", "by"))
        report = None
        if name is not None:
            keys = tuple(k.strip() for k in (by or "agent_id,user_id").split(",") if k.strip())
            report = await ashadow_report(self.site.store, name, by=keys)
        return self.site.render(request, "shadow.html", report=report, filters={"name": name, "by": by})

    # ---- review -----------------------------------------------------------------------------

    async def review(self, request: Request) -> Response:
        if self.site.read_only:
            if request.method == "POST":
                return PlainTextResponse("judgehooks ui: read-only: labels are not written here", status_code=403)
            raise HTTPException(404, "Review is off: this server is read-only.")
        if request.method == "POST":
            return await self._label(request)
        try:
            kinds = [k for k in (request.query_params.get("queue") or "routed,failed,borderline").split(",") if k]
            if not kinds or set(kinds) - set(QUEUES):
                raise BadRequest(f"queue takes {', '.join(QUEUES)}, comma-separated")
            skipped = _skipped(request.query_params.get("skip", ""))
            evaluator = _text(request, "evaluator")
        except BadRequest as exc:
            return self._bad(request, exc)
        try:
            done = {lb.record_id for lb in await self.site.store.read_labels() if lb.reviewer == self.site.reviewer}
        except NotImplementedError as exc:
            return self.site.render(request, "message.html", 400, title="This store keeps no labels",
                                    message=str(exc))
        record = await self._next(await for_page(self.site.store), kinds, done | set(skipped), evaluator)
        token, new = csrf_token(request)
        response = self.site.render(request, "review.html", record=record, csrf=token, csrf_field=CSRF_FIELD,
                                    reviewer=self.site.reviewer, queue=",".join(kinds), skip=",".join(skipped),
                                    labelled=len(done), evaluator=evaluator,
                                    keys={"pass": PASS_KEY, "fail": FAIL_KEY, "skip": SKIP_KEY})
        if new:
            set_csrf_cookie(response, request, token)
        return response

    async def _next(self, store: Store, kinds: list[str], done: set[str], evaluator: str | None) -> EvalRecord | None:
        """The first record of the queue that is neither labelled by this reviewer nor skipped (nor a
        judge health check: a check of the judge, not a verdict on a run)."""
        where = RecordFilter(evaluator=evaluator)
        for kind in kinds:
            if kind == "sample":
                graded = await page(store, Browse(where, judged=True), limit=SCANNED)
                ordered = sorted(graded, key=lambda r: r.id)  # the same store gives the same sample
                chosen = random.Random(0).sample(ordered, len(ordered))
                found = next((r for r in chosen if r.id not in done and r.scope != "health"), None)
            else:
                browse = (Browse(where.replace(status="failed"), judged=True) if kind == "failed"
                          else Browse(where, judged=True, routed=True) if kind == "routed"
                          else Browse(where, judged=True, borderline=1.0))
                found = None
                for offset in range(0, SCANNED, 200):
                    batch = await page(store, browse, offset=offset, limit=200)
                    found = next((r for r in batch if r.id not in done and r.scope != "health"), None)
                    if found or len(batch) < 200:
                        break
            if found:
                return found
        return None

    async def _label(self, request: Request) -> Response:
        form = await read_form(request)
        if form is None:
            return PlainTextResponse("judgehooks ui: refused: this form lacks its CSRF token (reload the page)",
                                     status_code=403)
        verdict, record_id = form.get("verdict"), form.get("record_id", "")
        try:
            skipped = _skipped(form.get("skip", ""))
        except BadRequest as exc:
            return self._bad(request, exc)
        if verdict in ("pass", "fail"):
            note = form.get("note", "").strip() or None
            try:
                await alabel(record_id, passed=verdict == "pass", note=note, by=self.site.reviewer,
                             store=self.site.store)
            except (LookupError, ValueError) as exc:
                return self.site.render(request, "message.html", 400, title="Not labelled", message=str(exc))
        elif verdict == "skip" and record_id:
            skipped = [*skipped, record_id][-MAX_SKIPPED:]
        else:
            return self.site.render(request, "message.html", 400, title="Not labelled",
                                    message="verdict must be pass, fail or skip")
        query = {"queue": form.get("queue") or None, "skip": ",".join(skipped) or None,
                 "evaluator": form.get("evaluator") or None}
        return RedirectResponse(self.site.render_link(request, "/review", **query), status_code=303)


def _said(items: list[Feedback]) -> str:
    """``👍 2 👎 1 · 3.5 (2)``: the thumbs up and down, and the mean of the numbers with their count."""
    up, down = sum(f.value == "up" for f in items), sum(f.value == "down" for f in items)
    scores = [f.score for f in items if f.score is not None]
    parts = [*([f"\N{THUMBS UP SIGN} {up}"] if up else []), *([f"\N{THUMBS DOWN SIGN} {down}"] if down else []),
             *([f"{sum(scores) / len(scores):.3g} ({len(scores)})"] if scores else [])]
    return " · ".join(parts)


def _skipped(text: str) -> list[str]:
    ids = [i for i in text.split(",") if i][-MAX_SKIPPED:]
    if any(len(i) > 200 for i in ids):
        raise BadRequest("skip holds record ids")
    return ids


def _tool_calls(record: EvalRecord) -> Any:
    """The run's tool calls, where the evaluator kept them (metadata or details), else None."""
    for place in (record.metadata, record.details):
        calls = place.get("tool_calls") if isinstance(place, dict) else None
        if calls:
            return calls
    return None
