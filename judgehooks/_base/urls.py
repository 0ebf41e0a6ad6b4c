"""URLs that may be stored, sent or printed: no credentials.

A judge's `api_base` may carry a secret (``https://user:token@host/v1``, ``...?api-key=...``). What
an evaluator stores with its jobs (the outbox spec, Redis jobs) keeps only scheme, host, port and
path; the evaluator itself keeps the full URL to call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit


def without_credentials(url: str) -> str:
    """`url` as scheme://host[:port]/path, without user info, query or fragment."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # not a URL we can read: keep nothing that might be a secret
        return ""
    if not parts.scheme or not parts.hostname:
        return url.split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}{f':{port}' if port is not None else ''}{parts.path}"


def spec_without_credentials(spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An evaluator's spec (flat, or {"class", "settings"}) with its `api_base` stripped of credentials."""
    if spec is None:
        return None
    clean = dict(spec)
    if isinstance(clean.get("api_base"), str):
        clean["api_base"] = without_credentials(clean["api_base"])
    settings = clean.get("settings")
    if isinstance(settings, Mapping) and isinstance(settings.get("api_base"), str):
        clean["settings"] = {**settings, "api_base": without_credentials(settings["api_base"])}
    return clean


# A password given as a parameter: `?password=...` / `&sslpassword=...` in a URL, or `password=...`
# (quoted or not) in a libpq key=value string.
_PASSWORD_PARAM = re.compile(r"(?i)((?:^|[?&;\s])(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)")


def redact(url: str) -> str:
    """The URL (or libpq connection string) with every password replaced by ***: the userinfo's
    and any ``password=`` / ``sslpassword=`` parameter's. For messages and logs."""
    text = _PASSWORD_PARAM.sub(r"\1***", url)
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError:  # not a URL (a key=value string, or a malformed netloc)
        return text
    if password is None:
        return text
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def passwords(url: str) -> list[str]:
    """The passwords `url` holds, as written and percent-decoded, longest first (to hide them
    where an error message quotes them)."""
    found = [m.group(2).strip("'") for m in _PASSWORD_PARAM.finditer(url)]
    try:
        if (password := urlsplit(url).password) is not None:
            found.append(password)
    except ValueError:
        pass
    every = {text for value in found for text in (value, unquote(value)) if text}
    return sorted(every, key=len, reverse=True)
