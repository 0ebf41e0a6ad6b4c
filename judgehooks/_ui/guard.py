"""What every response of the app carries and every request must pass: the security headers (a
Content-Security-Policy without 'unsafe-inline'), the access token when one is set, the Host check
that stops DNS rebinding when none is, and the CSRF check of the forms that write (a double-submit
cookie, and the Origin header when the browser sends one). The feedback endpoint an app's own front
end posts to has a rule of its own: the token (a backend) or this server's Origin (a browser on a
page of this origin), never neither."""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Collection
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Referrer-Policy same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on the
# page's own form posts, and the Origin check refuses them. Other sites still get no referrer.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff", "referrer-policy": "same-origin",
           "x-frame-options": "DENY", "cache-control": "no-store", "cross-origin-opener-policy": "same-origin"}
TOKEN_COOKIE = "judgehooks_ui_token"
CSRF_COOKIE = "judgehooks_ui_csrf"
CSRF_FIELD = "csrf"
#: the largest form body read, in bytes: a label and its note
MAX_FORM_BYTES = 64 * 1024
#: the names a browser uses for this machine: without a token the app answers only these. A page of
#: another site can point a name of its own at 127.0.0.1 (DNS rebinding) and read what the app
#: answers, but the browser still sends that other name in the Host header.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_HOST = re.compile(r"(?:\[([0-9a-f:.]+)\]|([a-z0-9_.-]+))(?::[0-9]{1,5})?")
#: request methods that change nothing: no Origin check
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
#: where an app's front end (or its backend) posts end users' feedback, as JSON
FEEDBACK_PATH = "/api/feedback"


class Guard:
    """ASGI middleware: security headers on every response; with a `token`, every request shows it
    (``Authorization: Bearer``, or the cookie set after one visit to ``?token=...``) or gets 401;
    with `hosts` (by default the loopback names when there is no token), a request whose Host is
    another name gets 400; a request that may write (not GET or HEAD) whose Origin is not this
    server's (or names another host) gets 403."""

    def __init__(self, app: ASGIApp, token: str | None, hosts: Collection[str] | None = None) -> None:
        self.app = app
        self.token = token
        self.hosts = frozenset(hosts) if hosts is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        request = Request(scope)
        if request.method == "POST" and route_path(scope) == FEEDBACK_PATH:
            refused = self._host(request) or self._feedback(request)
        else:
            refused = self._host(request) or self._origin(request)
            if refused is None and self.token is not None:
                refused = self._check(request)
        if refused is not None:
            await refused(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def _host(self, request: Request) -> Any:
        """None when the request's Host is one this app answers to, else the 400 that says so."""
        given = request.headers.get("host")
        if self.hosts is None or given is None or host_name(given) in self.hosts:
            return None
        names = ", ".join(f"[{h}]" if ":" in h else h for h in sorted(self.hosts))
        return PlainTextResponse(f"judgehooks ui: refused: the Host {given[:100]!r} is not a name of this server "
                                 f"(it answers to {names}; another name pointed at it is how a web page reads "
                                 "it through DNS rebinding). Open it by one of those names, or give the app a "
                                 "token or allowed_hosts", status_code=400)

    def _origin(self, request: Request) -> Any:
        """None unless a request that may write carries an Origin other than this server's (or one
        naming a host this app does not answer to): then the 403 that refuses it."""
        origin = request.headers.get("origin")
        if request.method in SAFE_METHODS or origin is None:
            return None
        own = f"{request.url.scheme}://{request.url.netloc}"
        if origin == own and (self.hosts is None or host_name(origin.split("://", 1)[1]) in self.hosts):
            return None
        return PlainTextResponse("judgehooks ui: refused: this form was sent from another origin (CSRF check)",
                                 status_code=403)

    def _feedback(self, request: Request) -> Any:
        """None when a feedback POST shows the token (the app's backend) or comes from a page of this
        origin (its Origin header is this server's: an end user's browser), else the JSON 403. A
        page of another site cannot pass: its browser sends that site's Origin, and it cannot send
        JSON here without a CORS preflight this app never grants."""
        bearer = request.headers.get("authorization", "")
        if self.token is not None and bearer.startswith("Bearer ") and _same(bearer[7:].strip(), self.token):
            return None
        origin = request.headers.get("origin")
        if origin is None:
            return JSONResponse({"error": "refused: feedback needs the app's token (Authorization: Bearer ...) "
                                          "or a request from a page of this origin (its Origin header)",
                                 "field": None}, status_code=403)
        own = f"{request.url.scheme}://{request.url.netloc}"
        if origin == own and (self.hosts is None or host_name(origin.split("://", 1)[1]) in self.hosts):
            return None
        return JSONResponse({"error": f"refused: feedback sent from another origin ({origin[:100]!r}): post it "
                                      "from a page of this origin, or from a backend with the app's token",
                             "field": None}, status_code=403)

    def _check(self, request: Request) -> Any:
        token = self.token or ""
        bearer = request.headers.get("authorization", "")
        if bearer.startswith("Bearer ") and _same(bearer[7:].strip(), token):
            return None
        if _same(request.cookies.get(TOKEN_COOKIE, ""), token):
            return None
        given = request.query_params.get("token")
        if given is not None and _same(given, token) and request.method == "GET":
            # Once, from the link: kept in a cookie, and the token taken out of the address bar and history.
            rest = urlencode([(k, v) for k, v in parse_qsl(request.url.query) if k != "token"])
            response = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", path=cookie_path(request))
            return response
        return PlainTextResponse("judgehooks ui: this server needs its access token (open the link with "
                                 "?token=..., or send Authorization: Bearer ...)", status_code=401)


def host_name(value: str) -> str | None:
    """The host of a Host header or an origin's ``host[:port]``, lower case and without its port
    (``[::1]:8765`` -> ``::1``); None when `value` is not of that form."""
    match = _HOST.fullmatch(value.strip().lower())
    return None if match is None else match.group(1) or match.group(2)


def route_path(scope: Scope) -> str:
    """The request's path within this app, wherever it is mounted."""
    path, root = str(scope.get("path", "")), str(scope.get("root_path") or "")
    return path[len(root):] if root and path.startswith(root) else path


def _same(given: str, expected: str) -> bool:
    return bool(given) and bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def cookie_path(request: Request) -> str:
    return (request.scope.get("root_path") or "").rstrip("/") + "/"


def csrf_token(request: Request) -> tuple[str, bool]:
    """The request's CSRF token, and whether it is new (the response must set its cookie)."""
    have = request.cookies.get(CSRF_COOKIE, "")
    if 20 <= len(have) <= 100 and have.isascii():
        return have, False
    return secrets.token_urlsafe(32), True


def set_csrf_cookie(response: Any, request: Request, token: str) -> None:
    response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path=cookie_path(request))


async def read_form(request: Request) -> dict[str, str] | None:
    """The urlencoded form of a POST, or None when it is not one, is too large, or fails the CSRF
    check (its ``csrf`` field must equal the cookie; `Guard` has checked the Origin header)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        form = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20))
    except (UnicodeDecodeError, ValueError):
        return None
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not _same(form.get(CSRF_FIELD, ""), cookie):
        return None
    return form
