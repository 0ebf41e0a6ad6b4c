"""Ready notifiers for ``on_fail`` / ``on_error`` / ``on_record`` and for `WindowedAlert`.

Each is an async callable taking an `EvalRecord` (or a `QualityAlert`). An HTTP notifier never adds
its latency to a run: the call only queues the POST as a task on the judgehooks loop (tracked, so
`drain()` waits for it) and returns. Deliveries retry with exponential backoff and jitter, honour
Retry-After, and give up with a `notify_failed` log event; at most ``max_pending`` deliveries wait
at once, so a dead receiver cannot pile up work: the rest are dropped with `notify_dropped` and
counted. A notifier never raises into the run.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio

from .._base.log import log
from .._base.record import FIELDS, EvalRecord
from .._base.validate import check_finite
from .._runtime import runtime

_MAX_RETRY_AFTER = 30.0
#: what a WebhookNotifier posts of a record unless told otherwise: every field but the run's raw text
DEFAULT_FIELDS: tuple[str, ...] = tuple(f for f in FIELDS if f not in ("input", "output"))
# Slack's documented limits (https://api.slack.com/reference/block-kit/blocks): a longer message is
# refused with HTTP 400, which is not worth retrying, so the alert would be lost.
SLACK_SECTION_TEXT = 3000
SLACK_FIELD_TEXT = 2000
SLACK_MESSAGE_TEXT = 3000  # the top-level fallback text (notifications, old clients)
_SLACK_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_ssl_context: Any = None


def _shared_ssl_context() -> Any:
    """One TLS context for every delivery: building one costs ~45 ms of CPU on the judgehooks loop,
    which would otherwise land on the next run's grading."""
    global _ssl_context
    if _ssl_context is None:
        import httpx

        _ssl_context = httpx.create_ssl_context()
    return _ssl_context


def _check(name: str, value: Any, *, minimum: float, integer: bool = False, strict: bool = False) -> None:
    bad = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
    if bad or value < minimum or (strict and value == minimum):
        raise ValueError(f"{name} must be {'an integer' if integer else 'a number'} "
                         f"{'>' if strict else '>='} {minimum}, got {value!r}")
    check_finite(name, value)


def describe(item: Any) -> dict[str, Any]:
    """The JSON-ready fields of what is notified: a record, or an alert (anything with `as_dict`)."""
    if isinstance(item, EvalRecord):
        return {"kind": "evaluation", **item.model_dump(mode="json")}
    if hasattr(item, "as_dict"):
        fields: dict[str, Any] = item.as_dict()
        return fields
    raise TypeError(f"a notifier takes an EvalRecord or a QualityAlert, got {type(item).__name__}")


def summary(item: Any) -> str:
    """One human line: what failed, where, and why."""
    data = describe(item)
    where = data.get("agent_name") or data.get("agent_id") or data.get("team_name") or data.get("team_id") or "?"
    if data["kind"] == "quality_alert":
        return (f"Quality alert: {data['evaluator']} on {where}: pass rate {data['pass_rate']:.0%} over the last "
                f"{data['graded']} graded runs (threshold {data['threshold']:.0%}; {data['errors']} judge errors)")
    score = "" if data.get("score") is None else f" (score {data['score']:g})"
    return f"{data['evaluator']} {data['status']} on {where}{score}: {data.get('reason') or data.get('error_message')}"


def _redacted(url: str) -> str:
    """Webhook URLs carry secrets in their path (Slack's do): logs show only scheme and host."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/..."


class WebhookNotifier:
    """POST a JSON payload for each record or alert to ``url`` (``{"kind": ..., <record fields>}``).

    ``fields`` names the record fields posted (default `DEFAULT_FIELDS`: all but the run's raw
    ``input`` and ``output``); ``timeout`` bounds each attempt as a whole (seconds, connecting,
    sending and reading together), ``retries`` extra attempts on connection errors, timeouts,
    408/429 and 5xx, ``backoff`` the base delay; ``max_pending`` deliveries may wait at once.
    ``stats()`` counts sent, failed, dropped and pending."""

    #: every record field, for ``fields=WebhookNotifier.ALL_FIELDS`` (the run's input and output included)
    ALL_FIELDS: tuple[str, ...] = FIELDS
    DEFAULT_FIELDS: tuple[str, ...] = DEFAULT_FIELDS

    def __init__(self, url: str, *, headers: dict[str, str] | None = None, timeout: float = 5.0, retries: int = 3,
                 backoff: float = 0.5, max_pending: int = 100, fields: Iterable[str] | None = None) -> None:
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
            raise ValueError(f"url must be an http:// or https:// URL, got {url!r}")
        if headers is not None and not (isinstance(headers, dict)
                                        and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())):
            raise TypeError("headers must be a dict of strings to strings")
        _check("timeout", timeout, minimum=0, strict=True)
        _check("retries", retries, minimum=0, integer=True)
        _check("backoff", backoff, minimum=0)
        _check("max_pending", max_pending, minimum=1, integer=True)
        self.fields = _check_fields(fields)
        self.url, self.headers, self.timeout = url, dict(headers or {}), float(timeout)
        self.retries, self.backoff, self.max_pending = retries, float(backoff), max_pending
        self._lock = threading.Lock()
        self._counts = {"sent": 0, "failed": 0, "dropped": 0, "pending": 0}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_redacted(self.url)!r})"

    def payload(self, item: Any) -> dict[str, Any]:
        data = describe(item)
        if data["kind"] != "evaluation":
            return data
        return {"kind": "evaluation", **{name: data[name] for name in self.fields}}

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    async def __call__(self, item: Any) -> None:
        """Queue one delivery and return at once (the run never waits for the receiver)."""
        body = self.payload(item)
        with self._lock:
            full = self._counts["pending"] >= self.max_pending
            self._counts["dropped" if full else "pending"] += 1
        if full:
            log.warning("notify_dropped", notifier=repr(self), max_pending=self.max_pending,
                        record_id=getattr(item, "id", None))
            return
        runtime.submit(self._deliver, body)

    async def _deliver(self, body: dict[str, Any]) -> None:
        import httpx

        error = "no attempt made"
        attempt = 0
        try:
            async with httpx.AsyncClient(timeout=self.timeout, verify=_shared_ssl_context()) as client:
                while True:
                    attempt += 1
                    retry_after: float | None = None
                    try:
                        # httpx's timeout is per read: a receiver dripping a byte at a time would hold the
                        # delivery for ever. The deadline covers the whole attempt.
                        with anyio.fail_after(self.timeout):
                            response = await client.post(self.url, json=body, headers=self.headers)
                        if response.status_code < 300:
                            self._count("sent")
                            return
                        error = f"HTTP {response.status_code}"
                        retryable = response.status_code in (408, 429) or response.status_code >= 500
                        retry_after = _retry_after(response.headers.get("retry-after"))
                    except httpx.HTTPError as exc:
                        error, retryable = f"{type(exc).__name__}: {exc}", True
                    except TimeoutError:
                        error, retryable = f"no complete reply within {self.timeout:g} s", True
                    if not retryable or attempt > self.retries:
                        break
                    delay = self.backoff * 2 ** (attempt - 1) * (0.5 + random.random() / 2)
                    await anyio.sleep(retry_after if retry_after is not None else delay)
            self._count("failed")
            log.warning("notify_failed", notifier=repr(self), attempts=attempt, error=error)
        except Exception as exc:  # never let a delivery bug escape into the loop unlogged
            self._count("failed")
            log.exception("notify_failed", notifier=repr(self), attempts=attempt, error=str(exc))
        finally:
            with self._lock:
                self._counts["pending"] -= 1

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1


def _check_fields(fields: Iterable[str] | None) -> tuple[str, ...]:
    if fields is None:
        return DEFAULT_FIELDS
    chosen = tuple(fields) if not isinstance(fields, str) else (fields,)
    unknown = [f for f in chosen if f not in FIELDS]
    if unknown or not chosen:
        raise ValueError(f"fields must name EvalRecord fields ({', '.join(FIELDS)}), got {list(chosen)!r}")
    return chosen


def _retry_after(value: str | None) -> float | None:
    try:
        return None if value is None else min(max(float(value), 0.0), _MAX_RETRY_AFTER)
    except ValueError:
        return None


def slack_text(text: str, limit: int) -> str:
    """`text` for a Slack message: ``& < >`` escaped, so ``<!channel>`` and ``<https://evil|docs>``
    links arrive as plain text, then clipped to `limit` characters (never inside an escape)."""
    escaped = "".join(_SLACK_ESCAPES.get(ch, ch) for ch in text[:limit + 1])
    if len(escaped) <= limit and len(text) <= limit:
        return escaped
    out: list[str] = []
    used = 0
    for ch in text:
        piece = _SLACK_ESCAPES.get(ch, ch)
        if used + len(piece) > limit - 1:
            break
        out.append(piece)
        used += len(piece)
    return "".join(out) + "…"


class SlackNotifier(WebhookNotifier):
    """A Slack-compatible incoming webhook: ``{"text": <one line>, "blocks": [...]}`` per record or alert.

    Text from records (names, reasons) is escaped for Slack and clipped to its documented limits."""

    def payload(self, item: Any) -> dict[str, Any]:
        data, text = describe(item), summary(item)
        if data["kind"] == "quality_alert":
            facts = {"Evaluator": data["evaluator"], "Pass rate": f"{data['pass_rate']:.0%}",
                     "Graded": str(data["graded"]), "Judge errors": str(data["errors"])}
        else:
            facts = {"Evaluator": data["evaluator"], "Status": data["status"],
                     "Score": "-" if data.get("score") is None else f"{data['score']:g}",
                     "Run": str(data.get("run_id"))}
        return {"text": slack_text(text, SLACK_MESSAGE_TEXT), "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{slack_text(text, SLACK_SECTION_TEXT - 2)}*"}},
            {"type": "section", "fields": [
                {"type": "mrkdwn", "text": f"*{k}*\n{slack_text(v, SLACK_FIELD_TEXT - len(k) - 3)}"}
                for k, v in facts.items()]},
        ]}


class LogNotifier:
    """A structlog ``quality_alert`` warning per record or alert, through the application's logging."""

    def __repr__(self) -> str:
        return "LogNotifier()"

    async def __call__(self, item: Any) -> None:
        data = describe(item)
        fields = {k: data.get(k) for k in ("kind", "evaluator", "status", "score", "reason", "agent_id", "team_id",
                                           "run_id", "pass_rate", "graded", "failed", "errors", "threshold")
                  if data.get(k) is not None}
        log.warning("quality_alert", summary=summary(item), **fields)
