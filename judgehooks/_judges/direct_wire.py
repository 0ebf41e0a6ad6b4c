"""The fast judge client's own HTTP: one aiohttp session per event loop, posting the request the
OpenAI SDK would post, without the SDK's per-request machinery.

At 256 calls in flight the SDK's request building (its options model, httpx request and header
objects, the httpx-to-aiohttp bridge) costs about three times what the HTTP exchange itself does
(``benchmarks/bench_scale.py --only cpu``, the bare client row). So the SDK is asked once per
client what it would send, its headers (authorization, organization, project, user agent, its
``X-Stainless-*`` fields), and every call posts those with the JSON body over aiohttp.

The SDK stays in charge of everything but the bytes on the wire:
- an HTTP error status becomes the SDK's own error, built by the SDK from the response
  (`_make_status_error_from_response`), so the exception, its ``status_code``, body and headers
  (Retry-After) are what the SDK raises;
- a timeout is its `APITimeoutError`, any other transport failure its `APIConnectionError`;
- the timeouts are the ones the SDK's aiohttp transport sets from the client's timeout
  (connect, pool and each read; no total), and the pool is its 1,000 connections;
- certificates come from the same ``httpx.create_ssl_context`` (certifi, ``SSL_CERT_FILE``,
  ``SSL_CERT_DIR``).

A base URL that the environment sends through a proxy (``HTTPS_PROXY``, ``ALL_PROXY``... not
bypassed by ``NO_PROXY``) goes through the SDK's own client, which implements the proxy rules;
so does every call when aiohttp cannot be imported. ``tests/judges/test_fast_judge.py`` sends the
same requests both ways and compares what the server received and what was raised.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..exceptions import JudgeUnavailable

#: the SDK's pool size (`openai.DEFAULT_CONNECTION_LIMITS`) and httpx's keep-alive expiry
MAX_CONNECTIONS, KEEPALIVE_S = 1000, 5.0
_CHUNK = 64 * 1024
#: False sends every call through the SDK's client (the tests compare the two)
enabled = True


def proxied(base_url: str) -> bool:
    """True when the environment routes `base_url` through a proxy (the SDK's client then sends)."""
    proxies = urllib.request.getproxies_environment()
    parts = urlsplit(base_url)
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # not in typeshed
    return not bypass(parts.hostname or "", proxies)


def usable(base_url: str) -> bool:
    """Whether calls to `base_url` take this client (else the SDK's)."""
    if not enabled or proxied(base_url):
        return False
    try:
        import aiohttp  # noqa: F401 (a litellm dependency; an install without it takes the SDK's path)
    except ImportError:
        return False
    return True


async def read_capped(headers: Mapping[str, str], pieces: AsyncIterator[bytes], limit: int) -> bytes:
    """The body, read in pieces; past `limit` bytes (or a declared Content-Length past it) reading stops
    and the reply is refused, so a huge reply never sits in memory."""
    declared = str(headers.get("content-length") or "")
    if declared.isdigit() and int(declared) > limit:
        raise JudgeUnavailable(f"the judge reply declares {int(declared)} bytes, more than max_reply_bytes={limit}; "
                               "not read")
    read, size = [], 0
    async for piece in pieces:
        size += len(piece)
        if size > limit:
            raise JudgeUnavailable(f"the judge reply is longer than max_reply_bytes={limit}; reading stopped there")
        read.append(piece)
    return b"".join(read)


class DirectClient:
    """The calls of one (base URL, key) on one event loop: the SDK's headers, aiohttp's pool."""

    def __init__(self, sdk: Any, base_url: str) -> None:
        import aiohttp

        self._aiohttp, self._sdk = aiohttp, sdk
        parts = urlsplit(base_url)  # the path appended as the SDK appends it: a query stays the query
        self.url = urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/chat/completions"))
        ssl: Any = True
        if parts.scheme == "https":
            import httpx

            ssl = httpx.create_ssl_context(trust_env=True)  # what the SDK's transport verifies with
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(
            limit=MAX_CONNECTIONS, keepalive_timeout=KEEPALIVE_S, ssl=ssl))
        self._per_timeout: dict[float, tuple[dict[str, str], Any]] = {}

    def _settings(self, timeout: float) -> tuple[dict[str, str], Any]:
        """The SDK's headers for a call with this timeout, and aiohttp's timeouts for it."""
        found = self._per_timeout.get(timeout)
        if found is None:
            from openai import Omit

            headers = {key: str(value) for key, value in {**self._sdk.auth_headers, **self._sdk.default_headers}.items()
                       if not isinstance(value, Omit)}
            headers.update({"X-Stainless-Retry-Count": "0", "X-Stainless-Read-Timeout": str(float(timeout))})
            found = self._per_timeout[timeout] = (headers, self._aiohttp.ClientTimeout(
                total=None, connect=timeout, sock_connect=timeout, sock_read=timeout))
        return found

    async def post(self, body: Mapping[str, Any], timeout: float, limit: int) -> bytes:
        """The reply body of a 2xx; the SDK's exception for anything else."""
        import openai

        headers, timeouts = self._settings(timeout)
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        try:
            async with self._session.post(self.url, data=data, headers=headers, allow_redirects=False,
                                          timeout=timeouts) as response:
                content = await read_capped(response.headers, response.content.iter_chunked(_CHUNK), limit)
                status, reply_headers = response.status, list(response.headers.items())
        except JudgeUnavailable:
            raise
        except TimeoutError as exc:  # aiohttp's connect and read timeouts are TimeoutErrors
            raise openai.APITimeoutError(request=self._request()) from exc
        except (self._aiohttp.ClientError, OSError) as exc:
            raise openai.APIConnectionError(request=self._request()) from exc
        if 200 <= status < 300:
            return content
        response = _httpx().Response(status, headers=reply_headers, content=content, request=self._request())
        raise self._sdk._make_status_error_from_response(response)

    def _request(self) -> Any:
        """The request as the SDK's errors carry it, without the headers (the key stays out of errors)."""
        return _httpx().Request("POST", self.url)

    async def close(self) -> None:
        await self._session.close()
        await self._sdk.close()  # its own (unused) client too

    def is_closed(self) -> bool:
        return bool(self._session.closed)


def _httpx() -> Any:
    """The httpx the SDK is built on (``httpx2`` from openai 3, ``httpx`` before)."""
    from openai import _base_client

    return getattr(_base_client, "httpx2", None) or getattr(_base_client, "httpx")  # noqa: B009
