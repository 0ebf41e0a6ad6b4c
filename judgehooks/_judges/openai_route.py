"""The fast route resolved without importing litellm (its import takes seconds).

For the models whose request litellm would send unchanged (``openai/<any id>``, or an OpenAI chat
model litellm's price table lists under a bare name, with no temperature for the reasoning models),
`light_route` builds the same `WireRoute` that litellm's `resolve_route` would: same wire model, base
URL, body keys and price. Prices come from litellm's own table: its live ``litellm.model_cost`` when
the application has imported litellm (so `litellm.register_model` counts), else the JSON file litellm
ships and loads itself under ``LITELLM_LOCAL_MODEL_COST_MAP`` (read here once, about 30 ms).
Anything else returns None, and litellm decides, as before. ``tests/judges/test_light_route.py``
checks every OpenAI chat model in that table against litellm's own answer.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._base.secrets import remember
from .openai_wire import _OWN_KWARGS, MAX_REPLY_BYTES, WireRoute, litellm_configured, price_of_row
from .prompt import verdict_schema

# Model families whose parameters litellm rewrites or refuses (reasoning and audio models): with a
# temperature, litellm decides.
_SPECIAL = re.compile(r"^(?:o\d|gpt-5|gpt-audio|gpt-4o-audio|gpt-4o-mini-audio|gpt-realtime)|audio|realtime", re.I)
_table: dict[str, Any] | None = None


def light_route(model: str, kwargs: Mapping[str, Any], max_reply_bytes: int = MAX_REPLY_BYTES) -> WireRoute | None:
    """The fast route without litellm, or None when litellm must resolve this model."""
    if set(kwargs) - _OWN_KWARGS or litellm_configured() or os.environ.get("OPENAI_ORGANIZATION"):
        return None
    table = price_table()
    if table is None:
        return None
    if model.startswith("openai/"):
        wire_model = model[len("openai/"):]
    elif _entry(table, model, model) is not None and "/" not in model:
        wire_model = model  # a bare OpenAI model name litellm places by its table
    else:
        return None
    if not wire_model or wire_model.startswith(("responses/", "ft:")) or wire_model.endswith("-latest"):
        return None  # the Responses API, fine-tunes and aliases litellm rewrites: its path
    entry = _entry(table, model, wire_model)
    if entry is None:
        if _SPECIAL.search(wire_model):
            return None  # a name litellm reads as a reasoning or audio model: its rules
    elif (entry.get("mode") != "chat" or not entry.get("supports_response_schema") or price_of_row(entry) is None):
        return None  # another API, no JSON schema (litellm refuses it), or no price in the row: litellm's path
    temperature = kwargs.get("temperature")
    if temperature is not None and (_SPECIAL.search(wire_model) or (entry or {}).get("supports_reasoning")):
        return None
    api_key = kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY")
    if not api_key:
        return None  # litellm's path says which key is missing
    remember(str(api_key))
    base_url = (kwargs.get("api_base") or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
                or "https://api.openai.com/v1")
    extra = {} if temperature is None else {"temperature": temperature}
    params = {f"{mode}:{structured}": {**extra, **({"response_format": verdict_schema(mode)} if structured else {})}
              for mode in ("binary", "numeric") for structured in (True, False)}
    return WireRoute(model=model, wire_model=wire_model, base_url=str(base_url), api_key=str(api_key),
                     organization=None, timeout=float(kwargs.get("timeout") or 600.0), params=params,
                     price=price_of_row(entry), max_reply_bytes=max_reply_bytes)


def price_table() -> Mapping[str, Any] | None:
    """litellm's model table: its live one once imported, else the copy it ships (None when the
    application asked litellm for the remote table, which only litellm fetches)."""
    litellm = sys.modules.get("litellm")
    if litellm is not None and isinstance(getattr(litellm, "model_cost", None), dict):
        return litellm.model_cost  # type: ignore[no-any-return]
    if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True").strip().lower() not in ("true", "1", "yes", "on"):
        return None
    global _table
    if _table is None:
        spec = importlib.util.find_spec("litellm")
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        try:
            loaded = json.loads((Path(folders[0]) / "model_prices_and_context_window_backup.json").read_bytes())
        except (IndexError, OSError, ValueError):
            return None
        _table = loaded if isinstance(loaded, dict) else {}
    return _table


def _entry(table: Mapping[str, Any], model: str, wire_model: str) -> Mapping[str, Any] | None:
    """The model's row as litellm's `get_model_info` finds it for the openai provider."""
    for key in (model, wire_model, f"openai/{wire_model}"):
        row = table.get(key)
        if isinstance(row, Mapping) and row.get("litellm_provider") == "openai":
            return row
    return None

