"""URLs that may be stored or sent: no credentials.

A judge's `api_base` may carry a secret (``https://user:token@host/v1``, ``...?api-key=...``). What
an evaluator stores with its jobs (the outbox spec, Redis jobs) keeps only scheme, host, port and
path; the evaluator itself keeps the full URL to call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit


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
