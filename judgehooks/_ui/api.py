"""``POST /api/feedback``: end users' thumbs from an app's front end (or its backend), kept with
`judgehooks.feedback`'s rules. `Guard` has checked the token or the Origin; here: a JSON body of
bounded size, each field checked and named when bad, and a rate per user (or per address)."""

from __future__ import annotations

import json
import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from .._base.feedback import MAX_COMMENT_CHARS, MAX_ID_CHARS, Feedback, check_text, feedback_value
from .._base.log import log
from .site import Site

#: the largest body read, in bytes: a comment of MAX_COMMENT_CHARS characters beyond the BMP written
#: as \uXXXX escapes (12 bytes each, as Python's json.dumps writes them), and the ids
MAX_FEEDBACK_BYTES = 32 * 1024
FIELDS = ("run_id", "value", "comment", "user_id")
#: each text field's (longest, required, may be blank)
_TEXTS = {"run_id": (MAX_ID_CHARS, True, False), "comment": (MAX_COMMENT_CHARS, False, True),
          "user_id": (MAX_ID_CHARS, False, False)}
#: how many users (or addresses) the rate limit remembers at once; the least recent are forgotten
MAX_KEYS = 100_000


def error(message: str, status: int = 400, field: str | None = None, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message, "field": field}, status_code=status, headers=headers or None)


class RateLimit:
    """At most `count` requests per `per` seconds for each key, as a token bucket per key (a burst
    of `count`, then one every per/count seconds)."""

    def __init__(self, count: int, per: float, max_keys: int = MAX_KEYS) -> None:
        self.count, self.per, self.max_keys = count, per, max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def wait(self, key: str) -> float:
        """0 when `key` may go now (and it is counted), else the seconds until it may."""
        now = time.monotonic()
        tokens, then = self._buckets.pop(key, (float(self.count), now))
        tokens = min(float(self.count), tokens + (now - then) * self.count / self.per)
        wait = 0.0 if tokens >= 1 else (1 - tokens) * self.per / self.count
        self._buckets[key] = (tokens - 1 if wait == 0 else tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait


class FeedbackApi:
    def __init__(self, site: Site, rate: tuple[int, float]) -> None:
        self.site = site
        self.limit = RateLimit(*rate)

    async def post(self, request: Request) -> JSONResponse:
        if self.site.read_only:
            return error("read-only: this server keeps no feedback", 403)
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return error("send the feedback as JSON (Content-Type: application/json)", 415)
        body = await _body(request)
        if body is None:
            return error(f"the body is larger than {MAX_FEEDBACK_BYTES} bytes (a comment takes at most "
                         f"{MAX_COMMENT_CHARS} characters)", 413)
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # JSONDecodeError, too many digits or [
            return error(f"the body is not JSON ({str(exc)[:120]})")
        if not isinstance(data, Mapping):
            return error(f"the body must be a JSON object with {', '.join(FIELDS)}, got {type(data).__name__}")
        try:
            item = _feedback(data)
        except _Bad as exc:
            return error(str(exc), field=exc.field)
        key = f"user:{item.user_id}" if item.user_id is not None else \
            f"address:{request.client.host if request.client else '-'}"
        wait = self.limit.wait(key)
        if wait:
            return error(f"too much feedback from this {key.split(':')[0]}: at most {self.limit.count} every "
                         f"{self.limit.per:g} seconds", 429, **{"Retry-After": str(max(1, math.ceil(wait)))})
        try:
            await self.site.store.write_feedback([item])
        except NotImplementedError as exc:
            return error(str(exc), 501)
        except Exception as exc:  # the store's message may name its address: logged, not sent to a browser
            log.error("feedback_not_stored", run_id=item.run_id, error=f"{type(exc).__name__}: {str(exc)[:300]}")
            return error("the store could not keep the feedback (the server's log says why)", 503)
        return JSONResponse(item.data(), status_code=201)


class _Bad(ValueError):
    def __init__(self, message: str, field: str | None) -> None:
        super().__init__(message)
        self.field = field


def _feedback(data: Mapping[str, Any]) -> Feedback:
    """The feedback `data` gives; _Bad naming the first field that is missing, unknown or wrong."""
    unknown = sorted(str(k) for k in data if k not in FIELDS)
    if unknown:
        raise _Bad(f"unknown field {unknown[0][:40]!r} (the fields are {', '.join(FIELDS)})", unknown[0][:40])
    for name in ("run_id", "value"):
        if data.get(name) is None:
            raise _Bad(f"{name} is required", name)
    for name in FIELDS:  # in this order: the first bad field is the one named
        try:
            if name == "value":
                feedback_value(data[name])
            else:
                limit, required, blank = _TEXTS[name]
                check_text(name, data.get(name), limit, required=required, blank=blank)
        except ValueError as exc:
            raise _Bad(str(exc), name) from None
    return Feedback(run_id=data["run_id"], value=data["value"], comment=data.get("comment"),
                    user_id=data.get("user_id"))


async def _body(request: Request) -> bytes | None:
    """The body, or None when it is (or says it is) larger than MAX_FEEDBACK_BYTES."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FEEDBACK_BYTES:
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FEEDBACK_BYTES:
            return None
    return body
