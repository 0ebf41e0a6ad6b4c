"""The fast route resolved without litellm is the route litellm resolves: for every OpenAI chat model
in litellm's price table (with and without the ``openai/`` prefix, with and without a temperature)
and for OpenAI-compatible servers' own model names, either the same wire model, URL, body and price,
or no answer (litellm then decides)."""

from __future__ import annotations

import sys

import pytest

from judgehooks._judges.openai_route import light_route, price_table
from judgehooks._judges.openai_wire import load_litellm, resolve_route

KWARGS = {"timeout": 60.0, "max_retries": 0, "num_retries": 0, "api_key": "k"}


def _models() -> list[str]:
    litellm = load_litellm()
    chat = sorted(name for name, row in litellm.model_cost.items() if isinstance(row, dict)
                  and row.get("litellm_provider") == "openai" and row.get("mode") == "chat")
    assert len(chat) > 50  # the table is there and read
    bare = [name.removeprefix("openai/") for name in chat]
    return [*chat, *(f"openai/{name}" for name in bare), "openai/judge", "openai/SmolLM2-135M-Instruct",
            "openai/o3-local", "openai/responses/gpt-4.1", "gpt-4o-mini-unknown", "azure/gpt-4o", "anthropic/claude-3"]


def _same(light, full) -> None:
    assert full is not None, light.model
    assert (light.wire_model, light.base_url, light.api_key, light.timeout, light.price) == (
        full.wire_model, full.base_url, full.api_key, full.timeout, full.price), light.model
    assert dict(light.params) == dict(full.params), light.model


@pytest.mark.parametrize("temperature", [None, 0.0, 0.7])
def test_the_light_route_is_litellms_route_or_none(temperature):
    litellm = load_litellm()
    kwargs = {**KWARGS, **({} if temperature is None else {"temperature": temperature})}
    served = 0
    for model in _models():
        for extra in ({}, {"api_base": "http://127.0.0.1:9/v1"}):
            light = light_route(model, {**kwargs, **extra})
            if light is not None:
                served += 1
                _same(light, resolve_route(litellm, model, {**kwargs, **extra}))
    assert served > 50  # most OpenAI chat models are served without litellm


def test_the_default_model_and_a_local_server_are_served():
    assert light_route("openai/gpt-5-mini", KWARGS) is not None  # the evaluators' default judge
    assert light_route("openai/judge", {**KWARGS, "api_base": "http://127.0.0.1:9/v1", "temperature": 0.0})
    assert light_route("anthropic/claude-3-5-haiku-latest", KWARGS) is None  # another wire format: litellm
    assert light_route("openai/gpt-4o", {**KWARGS, "extra_headers": {"x": "y"}}) is None  # litellm options


def test_prices_from_the_shipped_table_are_litellms(monkeypatch):
    """Unimported, litellm's price table is read from the file it ships: the same prices."""
    litellm = load_litellm()
    live = light_route("openai/gpt-4o-mini", KWARGS)
    monkeypatch.delitem(sys.modules, "litellm")
    assert price_table() is not litellm.model_cost
    shipped = light_route("openai/gpt-4o-mini", KWARGS)
    assert live is not None and shipped is not None and live.price == shipped.price and live.price is not None


def test_a_price_registered_with_litellm_counts(monkeypatch):
    litellm = load_litellm()
    monkeypatch.setitem(litellm.model_cost, "openai/my-judge", {
        "litellm_provider": "openai", "mode": "chat", "supports_response_schema": True,
        "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6})
    route = light_route("openai/my-judge", KWARGS)
    assert route is not None and route.price is not None and route.price.prompt == 1e-6


def test_an_application_asking_litellm_for_the_remote_table_gets_litellms_resolution(monkeypatch):
    monkeypatch.delitem(sys.modules, "litellm")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")
    assert light_route("openai/gpt-4o-mini", KWARGS) is None
