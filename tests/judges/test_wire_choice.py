"""The wire client takes only models whose request litellm would send unchanged: for every OpenAI chat
model in litellm's price table (with and without the ``openai/`` prefix, with and without a temperature
or a ``max_tokens``) and for OpenAI-compatible servers' own model names, the wire client it builds
without importing litellm has the wire model, URL, body and price litellm's own rules give, or there
is none (litellm then makes the calls)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from judgehooks._base.record import JudgeMode
from judgehooks._judges.base import load_litellm
from judgehooks._judges.prompt import verdict_schema
from judgehooks._judges.wire import WireClient, price_of_row, price_table, wire_client

KWARGS = {"timeout": 60.0, "max_retries": 0, "num_retries": 0, "api_key": "k"}


def _wire(model: str, kwargs: dict[str, Any]) -> WireClient | None:
    return wire_client(model, kwargs, cap_reason=False)


def _models() -> list[str]:
    litellm = load_litellm()
    chat = sorted(name for name, row in litellm.model_cost.items() if isinstance(row, dict)
                  and row.get("litellm_provider") == "openai" and row.get("mode") == "chat")
    assert len(chat) > 50  # the table is there and read
    bare = [name.removeprefix("openai/") for name in chat]
    return [*chat, *(f"openai/{name}" for name in bare), "openai/judge", "openai/SmolLM2-135M-Instruct",
            "openai/o3-local", "openai/responses/gpt-4.1", "gpt-4o-mini-unknown", "azure/gpt-4o", "anthropic/claude-3"]


def _litellms(litellm: Any, model: str, kwargs: dict[str, Any]) -> tuple[str, dict[Any, Any], Any]:
    """litellm's own answer for a model the wire client takes: the wire model, the body's extra keys
    per mode and structured output (its `get_optional_params`), and the price (its `get_model_info`)."""
    from litellm.responses.bridge_check import responses_api_bridge_check

    wire_model, provider, _, _ = litellm.get_llm_provider(model, api_base=kwargs.get("api_base"))
    assert provider == "openai", model
    info, _ = responses_api_bridge_check(model=wire_model, custom_llm_provider="openai",
                                         api_base=kwargs.get("api_base"))
    assert info.get("mode") != "responses", model

    def params(mode: JudgeMode, structured: bool) -> dict[str, Any]:
        found = litellm.get_optional_params(model=wire_model, custom_llm_provider="openai",
                                            temperature=kwargs.get("temperature"), max_tokens=kwargs.get("max_tokens"),
                                            response_format=verdict_schema(mode) if structured else None)
        return {k: v for k, v in found.items()
                if v is not None and k not in ("max_retries", "extra_body") and not (k == "stream" and v is False)}

    try:
        price = price_of_row(litellm.get_model_info(model))
    except Exception:  # an unpriced model: cost None, as litellm reports it
        price = None
    modes = ("binary", "numeric", "pairwise", "name")
    return wire_model, {(m, s): params(m, s) for m in modes for s in (True, False)}, price


@pytest.mark.parametrize("temperature", [None, 0.0, 0.7])
@pytest.mark.parametrize("max_tokens", [None, 1024])
def test_the_wire_client_sends_what_litellm_would_send_or_is_not_chosen(temperature, max_tokens):
    litellm = load_litellm()
    extra = {k: v for k, v in {"temperature": temperature, "max_tokens": max_tokens}.items() if v is not None}
    served = 0
    for model in _models():
        for base in ({}, {"api_base": "http://127.0.0.1:9/v1"}):
            kwargs = {**KWARGS, **extra, **base}
            client = _wire(model, kwargs)
            if client is not None:
                served += 1
                wire_model, params, price = _litellms(litellm, model, kwargs)
                assert (client.wire_model, dict(client.params), client.price) == (wire_model, params, price), model
                assert client.base_url == base.get("api_base", "https://api.openai.com/v1")
    assert served > 50  # most OpenAI chat models are served without litellm


def test_the_default_model_and_a_local_server_are_served():
    assert _wire("openai/gpt-5-mini", KWARGS) is not None  # the evaluators' default judge
    assert _wire("openai/judge", {**KWARGS, "api_base": "http://127.0.0.1:9/v1", "temperature": 0.0})
    assert _wire("anthropic/claude-3-5-haiku-latest", KWARGS) is None  # another wire format: litellm
    assert _wire("openai/gpt-4o", {**KWARGS, "extra_headers": {"x": "y"}}) is None  # litellm options
    assert _wire("openai/gpt-5-mini", {**KWARGS, "max_tokens": 300}) is None  # litellm renames it for this model


def test_prices_from_the_shipped_table_are_litellms(monkeypatch):
    """Unimported, litellm's price table is read from the file it ships: the same prices."""
    litellm = load_litellm()
    live = _wire("openai/gpt-4o-mini", KWARGS)
    monkeypatch.delitem(sys.modules, "litellm")
    assert price_table() is not litellm.model_cost
    shipped = _wire("openai/gpt-4o-mini", KWARGS)
    assert live is not None and shipped is not None and live.price == shipped.price and live.price is not None


def test_a_price_registered_with_litellm_counts(monkeypatch):
    litellm = load_litellm()
    monkeypatch.setitem(litellm.model_cost, "openai/my-judge", {
        "litellm_provider": "openai", "mode": "chat", "supports_response_schema": True,
        "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6})
    client = _wire("openai/my-judge", KWARGS)
    assert client is not None and client.price is not None and client.price.prompt == 1e-6


def test_an_application_asking_litellm_for_the_remote_table_gets_litellms_resolution(monkeypatch):
    monkeypatch.delitem(sys.modules, "litellm")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")
    assert _wire("openai/gpt-4o-mini", KWARGS) is None
