"""The fast route a LiteLLMJudge resolves holds the provider key: its repr, which logs, tracebacks
and a debugger show, must not."""

from __future__ import annotations

from judgehooks._judges.litellm import LiteLLMJudge

KEY = "sk-live-0123456789abcdef"


def test_the_routes_repr_never_shows_the_api_key(server):
    route = LiteLLMJudge("openai/judge", api_base=server.base_url, api_key=KEY).route
    assert route is not None and route.api_key == KEY  # the route does carry it, to send it
    assert KEY not in repr(route) and KEY not in str(route)
    assert server.base_url in repr(route)  # the rest of it is still there to debug with
