"""litellm's error mapping for the wire client: a failed call raises what litellm's own openai path
raises for it (the same exception class and message, the provider's response with its headers).

litellm's `exception_type` is imported once, on a worker thread, at the first failure
(`mapping_ready`): an import of seconds must not stall the event loop, and a judge whose calls all
succeed never imports it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .base import _import_lock, load_litellm

_mapping: tuple[Any, Any] | None = None  # litellm's exception_type and OpenAIError, once imported


def _load_mapping() -> tuple[Any, Any]:
    """litellm's error mapping, imported once (by one thread)."""
    global _mapping
    load_litellm()
    with _import_lock:
        if _mapping is None:
            from litellm.litellm_core_utils.exception_mapping_utils import exception_type
            from litellm.llms.openai.common_utils import OpenAIError

            _mapping = (exception_type, OpenAIError)
        return _mapping


async def mapping_ready() -> None:
    """litellm's error mapping imported, on a worker thread the first time a call fails: an import
    of seconds must not stall the event loop."""
    if _mapping is None:
        await asyncio.to_thread(_load_mapping)


def raise_mapped(wire_model: str, exc: BaseException) -> None:
    """Raise the exception litellm's openai handler raises for `exc` (`mapping_ready` first)."""
    import openai

    exception_type, OpenAIError = _mapping or _load_mapping()  # noqa: N806 (litellm's class)
    original: BaseException = exc
    upstream = _bare(getattr(exc, "response", None))
    if not isinstance(exc, openai.APITimeoutError):
        original = OpenAIError(status_code=getattr(exc, "status_code", 500),
                               message=getattr(exc, "message", str(exc)), response=upstream,
                               headers=getattr(upstream, "headers", None), body=getattr(exc, "body", None))
    try:
        exception_type(model=wire_model, original_exception=original, custom_llm_provider="openai")
    except Exception as mapped:
        if upstream is not None:  # litellm's own path hands its caller the provider's headers (Retry-After)
            mapped.response = upstream  # type: ignore[attr-defined]
        raise


def _bare(upstream: Any) -> Any:
    """The provider's error response (the SDK's, an httpx or httpx2 Response) as an httpx Response with
    its status, headers (Retry-After) and body, and a request without the SDK's credentials."""
    import httpx

    status, headers = getattr(upstream, "status_code", None), getattr(upstream, "headers", None)
    if not isinstance(status, int) or headers is None:
        return None
    request = getattr(upstream, "_request", None)
    bare = httpx.Request(str(request.method), str(request.url)) if request is not None else None
    return httpx.Response(status, headers=list(headers.items()), content=bytes(upstream.content), request=bare)
