"""`Site`: what every page needs (the store, this app's settings, the templates) and how a page is
rendered: links that hold wherever the app is mounted, and the template filters."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..stores._base import BaseStore

TEMPLATES = Path(__file__).parent / "templates"
_TRACE_ID = re.compile(r"[0-9A-Za-z_-]{1,128}")


@dataclass(frozen=True)
class Site:
    """What every page needs: the store, and how this app was configured."""

    store: BaseStore
    read_only: bool
    trace_url: str | None
    reviewer: str
    templates: jinja2.Environment
    #: seconds between the live pages' looks for a new record (0: the pages never look)
    live_every: float = 5.0
    #: agno's db, where a session page reads the turns no record keeps (redacted by `redact`)
    agno_db: Any = None
    redact: Callable[[str], str] | None = None

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        def link(path: str, **params: Any) -> str:
            return self.render_link(request, path, **params)

        context.setdefault("bad", None)  # a query value the page could not use: said above its form
        context.setdefault("bad_field", None)  # and beside the form field it came from
        context.setdefault("live", None)  # the newest record's marker, on a page that shows new ones live
        html = self.templates.get_template(name).render(
            request=request, base=_base(request), link=link, read_only=self.read_only, trace_link=self.trace_link,
            page=name.removesuffix(".html"), live_every_ms=int(self.live_every * 1000), **context)
        return HTMLResponse(html, status_code=status)

    @staticmethod
    def render_link(request: Request, path: str, **params: Any) -> str:
        """The address of `path` in this app (wherever it is mounted), with the query `params` that are set."""
        query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
        return f"{_base(request)}{path}" + (f"?{query}" if query else "")

    def trace_link(self, trace_id: str | None) -> str | None:
        """The trace's address from the configured template, or None (no template, or an id that is
        not a plain token: a stored id never chooses where a link goes)."""
        if not self.trace_url or not trace_id or not _TRACE_ID.fullmatch(trace_id):
            return None
        return self.trace_url.replace("{trace_id}", trace_id)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.{digits}f}"


def _run_tokens(record: Any) -> str:
    """The judged run's tokens, in and out together ("-" when agno reported none)."""
    parts = [t for t in (record.run_input_tokens, record.run_output_tokens) if t is not None]
    return str(sum(parts)) if parts else "-"


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _segment(value: str) -> str:
    """A stored id as one path segment: a slash or ``..`` in it never leads to another page."""
    return quote(value, safe="")


def _base(request: Request) -> str:
    return str(request.scope.get("root_path") or "").rstrip("/")


def templates() -> jinja2.Environment:
    """The page templates, every value autoescaped."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pct=_pct, num=_num, when=_when, pretty=_pretty, seg=_segment, run_tokens=_run_tokens)
    return env
