"""Credentials out of what judgehooks writes: one scrubber that every record (its error message and
the errors in its details, so also its OpenTelemetry event, callbacks and stores) and every log line
pass through (`EvalRecord`'s validator and the library logger call it).

A provider's error body may quote the request, `Authorization` header included (some gateways and
proxies do), and a connection error may quote a URL with its password. What is masked, as
``[REDACTED]``:

- every secret value this process handed a judge (`remember`: the judge's ``api_key`` and the
  provider key variables of the environment), wherever it appears;
- the token after ``Bearer``, ``Basic`` or ``Digest``;
- the password of a URL's ``user:password@``;
- the value after a credential's name: ``api_key=``, ``"x-api-key": "..."``, ``password:``,
  ``?token=``, ``secret=``, ``authorization:`` ...;
- keys with a vendor prefix (``sk-...``).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

MASK = "[REDACTED]"

_known: frozenset[str] = frozenset()
_lock = threading.Lock()
#: the shortest value `remember` keeps: masking every "abc" in every message would mask words
_MIN_SECRET = 6
#: environment variables whose values are credentials: OPENAI_API_KEY, AZURE_API_KEY, HF_TOKEN ...
_SECRET_NAME = re.compile(r"(?:API_?KEY|TOKEN|SECRET|PASSWORD|ACCESS_KEY)\Z", re.IGNORECASE)

_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic|Digest)\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=\-]{3,}", re.IGNORECASE)
_USERINFO = re.compile(r"(://[^\s/@:]{0,256}):[^\s/@]{1,256}@")
_NAMED = re.compile(
    r"((?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|refresh[_-]?token|(?<![A-Za-z])token|secret"
    r"|password|passwd|private[_-]?key|access[_-]?key|authorization)[\"']?[ \t]{0,3}[:=][ \t]{0,3}[\"']?)"
    r"(?!\[REDACTED\]|Bearer\b|Basic\b|Digest\b)(?=[^\s\"'&,;}\]()]*[A-Za-z0-9])([^\s\"'&,;}\]()]+)", re.IGNORECASE)
_VENDOR = re.compile(r"\b(?:sk|rk|pk)[-_][A-Za-z0-9_\-]{16,}|\b(?:ghp|gho|ghs|ghu|github_pat|glpat|hf|xox[abposr])[-_]"
                     r"[A-Za-z0-9_\-]{16,}|\bAKIA[0-9A-Z]{16}\b")
_HINTS = ("bearer", "basic", "digest", "://", "key", "token", "secret", "pass", "pwd", "auth", "sk-", "sk_", "gh",
          "gl", "hf_", "xox", "akia")


def remember(secret: str | None) -> None:
    """Mask this value wherever it appears from now on (a judge's API key)."""
    global _known
    if isinstance(secret, str) and len(secret.strip()) >= _MIN_SECRET and secret not in _known:
        with _lock:
            _known = _known | {secret, secret.strip()}


def remember_environment(environ: Mapping[str, str] | None = None) -> None:
    """Mask the values of the environment's credential variables (``*_API_KEY``, ``*_TOKEN``, ...):
    the keys litellm and the OpenAI client read when no ``api_key`` is given."""
    for name, value in (os.environ if environ is None else environ).items():
        if _SECRET_NAME.search(name):
            remember(value)


def scrub(text: str) -> str:
    """`text` with every credential it holds masked (see the module docstring)."""
    if not text:
        return text
    for secret in _known:
        if secret in text:
            text = text.replace(secret, MASK)
    lowered = text.lower()
    if not any(hint in lowered for hint in _HINTS):
        return text
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)} {MASK}", text)
    if "://" in text:
        text = _USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    text = _NAMED.sub(lambda m: m.group(1) + MASK, text)
    return _VENDOR.sub(MASK, text)


def scrub_data(value: Any) -> Any:
    """`scrub` applied to every string in JSON-like data (dict values, lists, tuples); the same object
    back when nothing changed."""
    return scrub(value) if isinstance(value, str) else _rebuilt(value, lambda key, item: scrub_data(item))


def scrub_errors(value: Any) -> Any:
    """`scrub` applied to the strings under an ``error`` / ``error_message`` key anywhere in JSON-like
    data (a composite's details hold its members' errors); the same object back when nothing changed."""
    return _rebuilt(value, lambda key, item: scrub_data(item) if key in ("error", "error_message")
                    else scrub_errors(item))


def _rebuilt(value: Any, each: Callable[[Any, Any], Any]) -> Any:
    """A dict, list or tuple with `each(key, item)` applied to its items (key None in a list or tuple);
    the same object back when nothing changed. Any other value as it is."""
    if isinstance(value, dict):
        items = {k: each(k, v) for k, v in value.items()}
        return value if all(items[k] is value[k] for k in value) else items
    if isinstance(value, (list, tuple)):
        changed = [each(None, v) for v in value]
        return value if all(a is b for a, b in zip(changed, value, strict=True)) else type(value)(changed)
    return value
