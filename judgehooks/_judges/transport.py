"""How the wire client's posts go over HTTP, decided once per base URL (`proxied`) and kept per event loop.

Where the environment sends the base URL through a proxy (``HTTPS_PROXY``, ``HTTP_PROXY``,
``ALL_PROXY``, not bypassed by ``NO_PROXY``), the OpenAI SDK's own client posts (`SdkPoster`, on the
SDK's aiohttp transport), which applies the proxy rules. Elsewhere one aiohttp session per event loop
posts what the SDK would post (`DirectPoster`): the SDK is asked once for its headers and builds each
HTTP error from the response. The SDK's own request path costs about three times the CPU per call
with many calls in flight, and its default httpx pool far more (docs/benchmarks.md, issue 40). Both
read a reply in pieces up to its size limit, and neither follows a redirect.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.request
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..exceptions import JudgeUnavailable

#: the SDK's pool size (`openai.DEFAULT_CONNECTION_LIMITS`) and httpx's keep-alive expiry
MAX_CONNECTIONS, KEEPALIVE_S = 1000, 5.0
_CHUNK = 64 * 1024


def proxied(base_url: str) -> bool:
    """True when the environment routes `base_url` through a proxy (the SDK's own client then posts)."""
    proxies = urllib.request.getproxies_environment()
    parts = urlsplit(base_url)
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # not in typeshed
    return not bypass(parts.hostname or "", proxies)


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


class DirectPoster:
    """The posts of one (base URL, key) on one event loop: the SDK's headers over an aiohttp pool with
    the settings of the SDK's aiohttp transport (its pool size, connect and read timeouts, certificates
    from ``httpx.create_ssl_context``: certifi, ``SSL_CERT_FILE``, ``SSL_CERT_DIR``)."""

    def __init__(self, sdk: Any, base_url: str) -> None:
        import aiohttp

        self._aiohttp, self._sdk = aiohttp, sdk
        parts = urlsplit(base_url)  # the path appended as the SDK appends it: a query stays the query
        self.url = urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/chat/completions"))
        ssl: Any = True
        if parts.scheme == "https":
            import httpx

            ssl = httpx.create_ssl_context(trust_env=True)
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
        await self._sdk.close()

    def is_closed(self) -> bool:
        return bool(self._session.closed)


class SdkPoster:
    """The posts through the SDK's own client on its aiohttp transport, which applies the proxy rules."""

    _UNREAD = {"X-Stainless-Raw-Response": "stream"}  # the SDK's switch for "hand me the response unread"

    def __init__(self, sdk: Any) -> None:
        self._sdk = sdk

    async def post(self, body: Mapping[str, Any], timeout: float, limit: int) -> bytes:
        import httpx

        try:
            response = await self._sdk.post("/chat/completions", body=body, cast_to=httpx.Response, options={
                "timeout": timeout, "follow_redirects": False, "headers": self._UNREAD})
        except Exception as exc:
            error = _connection_error_as_such(exc)
            if error is exc:
                raise
            raise error from error.__cause__
        try:
            return await read_capped(response.headers, response.aiter_bytes(), limit)
        finally:
            await response.aclose()

    async def close(self) -> None:
        await self._sdk.close()

    def is_closed(self) -> bool:
        return bool(self._sdk.is_closed())


def _connection_error_as_such(exc: BaseException) -> BaseException:
    """The SDK's aiohttp transport maps every aiohttp connection error (refused, reset, a server that
    hangs up) to a ConnectTimeout, so the SDK raises APITimeoutError for them: only a timeout stays
    one, the others become the APIConnectionError litellm raises."""
    import openai

    root = getattr(exc.__cause__, "__cause__", None)
    if (not isinstance(exc, openai.APITimeoutError) or root is None or isinstance(root, TimeoutError)
            or not type(root).__module__.startswith("aiohttp")):
        return exc
    error = openai.APIConnectionError(request=exc.request)
    error.__cause__ = root
    return error


# One poster per event loop, base URL and key: a connection pool belongs to the loop that opened it.
_POSTERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPosters] = weakref.WeakKeyDictionary()


class _LoopPosters(dict[tuple[str, str, bool], Any]):
    """The posters of one loop, closed on that loop as it shuts down (`asyncio.run` and every runner call
    `loop.shutdown_asyncgens()` before closing it). Left to the garbage collector, a client would be
    closed on whichever loop runs then, and a later `asyncio.run` would log "Event loop is closed"."""

    def __init__(self) -> None:
        super().__init__()
        self.closer = self._close_at_shutdown()
        # Started on the running loop, the generator is registered by the loop's first-iteration
        # hook, and the loop's shutdown_asyncgens() runs its `finally` on the still-open loop.
        with contextlib.suppress(StopIteration):
            self.closer.asend(None).send(None)

    async def _close_at_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            posters = list(self.values())
            self.clear()
            for poster in posters:
                with contextlib.suppress(Exception):
                    await poster.close()


def poster(base_url: str, api_key: str, timeout: float, proxied: bool) -> DirectPoster | SdkPoster:
    """This loop's poster for a base URL and key: the SDK's own client where the URL is `proxied`."""
    loop = asyncio.get_running_loop()
    posters = _POSTERS.get(loop)
    if posters is None:
        posters = _POSTERS[loop] = _LoopPosters()
    key = (base_url, api_key, proxied)
    found = posters.get(key)
    if found is None:
        import openai

        http = openai.DefaultAioHttpClient(timeout=timeout) if proxied else None
        sdk = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout, http_client=http)
        found = posters[key] = SdkPoster(sdk) if proxied else DirectPoster(sdk, base_url)
    return found


def _httpx() -> Any:
    """The httpx the SDK is built on (``httpx2`` from openai 3, ``httpx`` before)."""
    from openai import _base_client

    return getattr(_base_client, "httpx2", None) or getattr(_base_client, "httpx")  # noqa: B009
