"""What every response of the app carries and every request must pass: the security headers (a
Content-Security-Policy without 'unsafe-inline'), the access token when one is set, and the CSRF
check of the forms that write (a double-submit cookie, and the Origin header when the browser sends one)."""

from __future__ import annotations

import hmac
import secrets
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse
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


class Guard:
    """ASGI middleware: security headers on every response; with a `token`, every request shows it
    (``Authorization: Bearer``, or the cookie set after one visit to ``?token=...``) or gets 401."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

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

        if self.token is not None:
            refused = self._check(Request(scope))
            if refused is not None:
                await refused(scope, receive, send_with_headers)
                return
        await self.app(scope, receive, send_with_headers)

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
    check (its ``csrf`` field must equal the cookie, and an Origin header must be this server's)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return None
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
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
