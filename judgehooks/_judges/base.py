"""Judges: the seam between an evaluator and the model that grades.

A Judge is anything with a ``model`` name and ``async complete(request) -> JudgeReply``.
`BaseJudge` declares the optional lifecycle methods (``prepare``, ``warm_up``, ``aclose``) with
no-op defaults, so callers call them instead of probing for them. `LiteLLMJudge` (any litellm model
string, the default), `AgnoJudge` (an agno Model or evaluator Agent) and `ProcessJudge` ship here;
`FakeJudge` in `judgehooks.testing`. Judges make ONE attempt: the retry policy lives in the core, so
there are no hidden SDK retries on top of ours.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._base.text import lazy_pattern
from .._base.urls import without_credentials
from ..exceptions import MalformedVerdict
from .prompt import JudgeRequest

#: the most tokens one reply may report (the largest context windows hold about 10**7), and the most
#: USD one call may cost: a figure past its bound, negative or NaN is no figure
MAX_TOKENS, MAX_CALL_USD = 10**9, 1_000.0


@dataclass(frozen=True, slots=True)
class JudgeReply:
    """One judge call's answer. Its usage figures are the judge's word: a number past its bound is kept
    out (None) and named in `unusable`, with the cost priced from such a count, so no reply records a
    negative spend, trips a cap (10**30 tokens) or overflows a cost. What is no number is left to the
    outcome's check."""

    text: str
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    finish_reason: str | None = None  # "length": the reply stopped at the judge's max_tokens
    unusable: str | None = None  # the figures kept out, as the judge reported them

    def __post_init__(self) -> None:
        p, c, usd = self.prompt_tokens, self.completion_tokens, self.cost_usd
        if ((p is None or type(p) is int and 0 <= p <= MAX_TOKENS) and (c is None or type(c) is int and 0 <= c
                <= MAX_TOKENS) and (usd is None or type(usd) is float and 0 <= usd <= MAX_CALL_USD)):
            return  # what every judge sends: checked at the cost of a few comparisons
        bounds = (("prompt_tokens", MAX_TOKENS), ("completion_tokens", MAX_TOKENS), ("cost_usd", MAX_CALL_USD))
        bad = {name: value for name, top in bounds if not within(value := getattr(self, name), top)}
        if bad.keys() - {"cost_usd"} and self.cost_usd is not None:
            bad.setdefault("cost_usd", self.cost_usd)  # priced from a count that is none
        for name in bad:
            object.__setattr__(self, name, None)
        if bad:
            said = ", ".join(f"{name}={value!r:.40}" for name, value in bad.items())
            object.__setattr__(self, "unusable", f"{self.unusable}, {said}" if self.unusable else said)


_import_lock = threading.Lock()  # litellm imported by one thread at a time: its lazy submodules race


def load_litellm() -> Any:
    """Import litellm on first use (it takes seconds) with its remote price-list fetch turned off."""
    with _import_lock:
        loaded: Any = sys.modules.get("litellm")
        if loaded is None or not getattr(loaded, "suppress_debug_info", False):
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm as loaded

            # litellm prints a "Give Feedback" banner on every error; a hook must never print.
            loaded.suppress_debug_info = True
        return loaded


@runtime_checkable
class Judge(Protocol):
    """One call to a grading model. Raise on failure; the core decides whether to retry."""

    model: str

    async def complete(self, request: JudgeRequest) -> JudgeReply: ...


class BaseJudge(ABC):
    """A `Judge` with the optional methods declared: subclass it and override `complete`.

    The pipeline calls `prepare` before a grading's first attempt, the background dispatcher
    `warm_up` on a side thread when it starts, and owners `aclose` when done; each does nothing
    unless a judge has something to do then.
    """

    model: str
    #: the reply's token cap, when the judge sets one: named by the error of a reply cut there
    max_tokens: int | None = None

    @abstractmethod
    async def complete(self, request: JudgeRequest) -> JudgeReply:
        """One call to the grading model. Raise on failure; the core decides whether to retry."""

    async def prepare(self) -> None:
        """Get ready on the event loop before a call (outside the call's timeout)."""
        return None

    def warm_up(self) -> None:
        """Get ready ahead of time, blocking (e.g. on a side thread before the first grading)."""
        return None

    async def aclose(self) -> None:
        """Release what the judge holds (clients, processes)."""
        return None

    @property
    def endpoint(self) -> str | None:
        """The URL the judge calls (it may carry credentials: strip them before showing it), or None
        when the provider's default is used."""
        return None


def shown_url(judge: Any) -> str | None:
    """The URL a judge calls without credentials (user info, query), or None for the provider's default."""
    url = judge.endpoint if isinstance(judge, BaseJudge) else None
    return (without_credentials(url) or None) if url else None


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


_RETRYABLE_NAMES = frozenset({
    "JudgeProcessDied", "Timeout", "APITimeoutError", "APIConnectionError", "RateLimitError", "InternalServerError",
    "ServiceUnavailableError", "BadGatewayError", "ConnectError", "ReadTimeout", "RemoteProtocolError"})


_AUTH_NAMES = frozenset({"AuthenticationError", "PermissionDeniedError"})
# litellm reports a missing OpenAI key as InternalServerError (500): the message is what tells
_AUTH_TEXT = lazy_pattern(r"missing credentials|(?:incorrect|invalid|missing|no)\W+(?:x-)?api[\W_]?key"
                        r"|api[\W_]?key\W+(?:is\W+)?(?:not set|missing|required|invalid)", re.IGNORECASE)


def is_auth_error(exc: BaseException) -> bool:
    """A missing, wrong or unauthorised API key: never worth another attempt."""
    return (error_name(exc) in _AUTH_NAMES or _status_of(exc) in (401, 403)
            or bool(_AUTH_TEXT.search(str(exc)[:2000])))


def refuses_structured_output(exc: BaseException) -> bool:
    """A server's 400 for the JSON schema response format: ask again without one."""
    text = str(exc).lower()
    return _status_of(exc) == 400 and ("response_format" in text or "json_schema" in text)


_TIMEOUT_NAMES = frozenset({"Timeout", "APITimeoutError", "ReadTimeout", "ConnectTimeout", "WriteTimeout",
                            "PoolTimeout", "TimeoutError"})
_CONNECTION_NAMES = frozenset({"APIConnectionError", "ConnectError", "RemoteProtocolError", "JudgeProcessDied",
                               "ClientConnectorError", "ServerDisconnectedError"})
_CONNECTION_TEXT = lazy_pattern(r"connection (?:error|refused|reset)|cannot connect|failed to connect", re.IGNORECASE)


def error_chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it was raised from (litellm and agno wrap the transport's error)."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(found) < 8 and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def error_kind(exc: BaseException) -> str:
    """What went wrong, in words a user acts on: ``auth``, ``timeout``, ``connection``, ``rate_limit``,
    ``malformed_verdict``, ``HTTP <status>``, else the error's type name. The first judge error of each
    kind an evaluator meets is logged as a warning (`JudgeCall.ask`)."""
    if isinstance(exc, MalformedVerdict):  # its message quotes the reply: no keyword in it counts
        return "malformed_verdict"
    chain = error_chain(exc)
    if any(is_auth_error(e) for e in chain):
        return "auth"
    # The deepest cause decides: aiohttp reports a refused connection as a ConnectTimeout, which
    # the SDK raises as APITimeoutError, with the ConnectionRefusedError underneath.
    for e in reversed(chain):
        if isinstance(e, TimeoutError) or error_name(e) in _TIMEOUT_NAMES:
            return "timeout"
        if isinstance(e, ConnectionError) or error_name(e) in _CONNECTION_NAMES:
            return "connection"
    if any(_CONNECTION_TEXT.search(str(e)[:500]) for e in chain):
        return "connection"
    status = _status_of(exc)
    if status == 429 or any(error_name(e) == "RateLimitError" for e in chain):
        return "rate_limit"
    return f"HTTP {status}" if status is not None else error_name(exc)


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts, connection errors and unreadable replies are worth another attempt;
    an authentication error is not, whatever status the client library gave it."""
    if isinstance(exc, MalformedVerdict):
        return True
    if is_auth_error(exc):
        return False
    status = _status_of(exc)
    return (isinstance(exc, (TimeoutError, ConnectionError)) or error_name(exc) in _RETRYABLE_NAMES
            or (status is not None and (status == 429 or status >= 500)))


def retry_after_seconds(exc: BaseException) -> float | None:
    """The server's Retry-After, when the error carries one (seconds form only)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "headers", None)
    value = headers.get("retry-after") if headers and hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def error_name(exc: BaseException) -> str:
    """A stable error_type: the exception's class name (litellm's names are informative), or the
    original's name for an error raised in the judge process or restated with where the judge is."""
    return getattr(exc, "remote_type", None) or type(exc).__name__


def count(value: Any) -> int | None:
    """A token count from a reply's usage, or None (a bool, or a mock's attribute, is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def within(value: Any, top: float) -> bool:
    """Whether a reported figure is a number from 0 to `top`; what is no number (None, text) passes here."""
    return not isinstance(value, (int, float)) or isinstance(value, bool) or 0 <= value <= top


def describe(exc: BaseException) -> str:
    text = str(exc) or repr(exc)
    return text if len(text) <= 500 else text[:497] + "..."

