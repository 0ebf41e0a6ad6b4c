"""`app(store)`: the Starlette application: its routes, the static files shipped in the package,
and the guard every request passes through."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .._judges.base import Judge
from .._judges.litellm import LiteLLMJudge
from ..stores._base import BaseStore, Store
from ..stores._human import default_reviewer
from .api import FeedbackApi
from .compare import Compare
from .failures import Failures
from .guard import FEEDBACK_PATH, LOOPBACK_HOSTS, Guard, host_name
from .pages import Pages
from .segments import Segments
from .site import Site, templates

STATIC = Path(__file__).parent / "static"
#: seconds one naming call may take
NAMING_TIMEOUT_S = 20.0


def app(store: Store, *, read_only: bool = False, token: str | None = None, trace_url: str | None = None,
        reviewer: str | None = None, allowed_hosts: Collection[str] | None = None,
        live_every: float = 5.0, agno_db: Any = None, redact: Callable[[str], str] | None = None,
        feedback_rate: tuple[int, float] = (30, 60.0), failure_namer: str | Judge | None = None) -> Starlette:
    """The pages over `store` as an ASGI app: serve it (``judgehooks ui``) or mount it
    (``fastapi_app.mount("/evals", app(store))``).

    ``read_only``: no review page and no label is written. ``token``: every request must show it
    (``Authorization: Bearer``, or open a page once with ``?token=...``). ``trace_url``: where a
    record's trace is shown, with ``{trace_id}`` in it (e.g. ``http://localhost:6006/trace/{trace_id}``).
    ``reviewer``: whose labels the review page writes (default: the login name).
    ``allowed_hosts``: the host names (no port) requests must be addressed to, ``["*"]`` for any;
    by default, without a token, this machine's (``127.0.0.1``, ``localhost``, ``[::1]``), so a web
    page cannot read the app through a name of its own pointed at 127.0.0.1 (DNS rebinding), and
    with a token any (the token guards it).
    ``live_every``: how often (seconds) the overview and the first page of records look for a new
    record while the page is visible, and show it without a reload; 0 turns that off.
    ``agno_db``: the agno db your agents store sessions in (sync or async): a session page shows
    every turn from it, also the ones no record keeps. ``redact``: the redactor those texts go
    through first (give the one your evaluators use: agno's db holds the texts unredacted).
    It also answers ``POST /api/feedback`` (JSON ``{run_id, value, comment?, user_id?}``): end users'
    thumbs from the app's own pages (this origin) or its backend (the token), kept as
    `judgehooks.feedback` keeps them. ``feedback_rate``: ``(count, seconds)``, how much feedback it
    takes from one user (by its ``user_id``, else by the client's address) before answering 429.
    ``failure_namer``: a judge (a litellm model string, or any `Judge`) that names the largest groups
    of the failure modes page; without one, a group is named by its words and no model is asked."""
    if not isinstance(store, BaseStore):
        raise TypeError(f"app reads a judgehooks store (a BaseStore subclass), got {type(store).__name__}")
    if token is not None and (not isinstance(token, str) or len(token) < 16):
        raise ValueError("app token must be a string of at least 16 characters (e.g. secrets.token_urlsafe())")
    if trace_url is not None and (not isinstance(trace_url, str) or "{trace_id}" not in trace_url
                                  or not trace_url.startswith(("http://", "https://", "/"))):
        raise ValueError("app trace_url must be an http(s) URL with {trace_id} in it, "
                         f"e.g. 'http://localhost:6006/trace/{{trace_id}}', got {trace_url!r:.80}")
    if isinstance(live_every, bool) or not isinstance(live_every, (int, float)) \
            or not (live_every == 0 or 0.2 <= live_every <= 3600):
        raise ValueError(f"app live_every is 0 (off) or seconds from 0.2 to 3600, got {live_every!r:.40}")
    if agno_db is not None and not callable(getattr(agno_db, "get_session", None)):
        raise TypeError(f"app agno_db must be an agno db (e.g. agno.db.sqlite.SqliteDb), got {type(agno_db).__name__}")
    if redact is not None and not callable(redact):
        raise TypeError(f"app redact must be a function of text (e.g. judgehooks.redact.PII), got {redact!r:.80}")
    if (not isinstance(feedback_rate, tuple) or len(feedback_rate) != 2 or isinstance(feedback_rate[0], bool)
            or not isinstance(feedback_rate[0], int) or feedback_rate[0] < 1
            or not isinstance(feedback_rate[1], (int, float)) or not 0 < feedback_rate[1] < float("inf")):
        raise ValueError(f"app feedback_rate must be (count, seconds), e.g. (30, 60.0) for 30 a minute per user, "
                         f"got {feedback_rate!r:.80}")
    namer = _namer(failure_namer)
    hosts = _hosts(allowed_hosts, token)
    site = Site(store, read_only, trace_url, reviewer or default_reviewer(), templates(), float(live_every),
                agno_db, redact)
    pages = Pages(site)
    routes = [
        Route("/", pages.overview, name="home"),
        # the same page at a path of its own: agno's AgentOS strips trailing slashes, so "/evals/" never
        # reaches an app mounted at /evals there, while "/evals/overview" does
        Route("/overview", pages.overview, name="overview"),
        Route("/records", pages.records, name="records"),
        Route("/records/{record_id:path}", pages.record, name="record"),
        Route("/calibration", pages.calibration, name="calibration"),
        Route("/compare", Compare(site).page, name="compare"),
        Route("/segments", Segments(site).page, name="segments"),
        Route("/failures", Failures(site, namer).page, name="failures"),
        Route("/shadow", pages.shadow, name="shadow"),
        Route("/sessions", pages.sessions, name="sessions"),
        Route("/sessions/{session_id:path}", pages.session, name="session"),
        Route("/review", pages.review, methods=["GET", "POST"], name="review"),
        Route("/api/latest", pages.latest, name="latest"),
        Route(FEEDBACK_PATH, FeedbackApi(site, (feedback_rate[0], float(feedback_rate[1]))).post, methods=["POST"],
              name="feedback"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(Guard, token=token, hosts=hosts)],
                     exception_handlers={404: pages.not_found, 500: pages.failed})


def _hosts(allowed: Collection[str] | None, token: str | None) -> frozenset[str] | None:
    """The host names the Guard lets through (lower case, IPv6 without brackets), or None for any."""
    if allowed is None:
        return None if token is not None else frozenset(LOOPBACK_HOSTS)
    if isinstance(allowed, str) or not all(isinstance(h, str) for h in allowed):
        raise ValueError(f"app allowed_hosts must be a list of host names, e.g. ['evals.example.com'], "
                         f"got {allowed!r:.80}")
    if "*" in allowed:
        return None
    names = {host_name(f"[{h}]" if ":" in h else h) for h in allowed}  # an IPv6 address as a Host writes it
    if None in names or not allowed:
        raise ValueError(f"app allowed_hosts takes host names without a scheme, path or port (e.g. "
                         f"'evals.example.com', '127.0.0.1', '::1'), or '*' for any, got {list(allowed)!r:.120}")
    return frozenset(n for n in names if n is not None)


def _namer(value: str | Judge | None) -> Judge | None:
    """`failure_namer`: a litellm model string (its provider's variables say where and with which key),
    or a `Judge`."""
    if value is None or isinstance(value, Judge):
        return value
    if isinstance(value, str) and value.strip():
        return LiteLLMJudge(value.strip(), timeout=NAMING_TIMEOUT_S)
    raise TypeError(f"app failure_namer must be a litellm model string (e.g. 'openai/gpt-4o-mini') or a judge "
                    f"with `async complete(request)`, got {type(value).__name__}")

