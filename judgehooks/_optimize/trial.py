"""A trial copy of an agent or team that shares no model object with the one passed in.

agno's ``deep_copy`` shares models by reference (they hold HTTP clients). A trial runs on the
judgehooks loop, and an OpenAI-style model caches the async client it makes on first use: on a shared
model that client, bound to judgehooks' loop, stayed on the caller's model, and the caller's next
``agent.arun`` in its own loop failed ("bound to a different event loop"). So every model of the copy
(its members' and its reasoning agent's included) is replaced by a copy of its own, made with agno's
``Model.__deepcopy__`` (which leaves the clients out), and the clients the trial made are closed when it
ends.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from typing import Any

from .._base.log import log


def _is_model(value: Any) -> bool:
    """An agno Model, by its shape (only a few folders import agno)."""
    return (not isinstance(value, type) and callable(getattr(value, "aresponse", None))
            and callable(getattr(value, "response", None)) and hasattr(value, "id"))


def _own_models(owner: Any, made: list[Any], seen: set[int], shared: dict[int, Any] | None = None) -> None:
    """Give `owner` (and its members) models of their own: fresh copies (listed in `made`), or with
    `shared`, the copies kept there for each original model (made once, then used by every copy at
    once, as agno's AgentOS shares one model across its concurrent runs)."""
    if id(owner) in seen:
        return
    seen.add(id(owner))

    def own(model: Any) -> Any:
        if shared is None:
            made.append(fresh := copy.deepcopy(model))
            return fresh
        kept = shared.get(id(model))
        if kept is None or kept[0] is not model:  # (the original, held: its id is never another's)
            kept = shared[id(model)] = (model, copy.deepcopy(model))
        return kept[1]

    for name, value in list(vars(owner).items()):
        if name.startswith("_"):
            continue
        if _is_model(value):
            setattr(owner, name, own(value))
        elif isinstance(value, list) and any(_is_model(v) for v in value):  # fallback models
            setattr(owner, name, [own(v) if _is_model(v) else v for v in value])
    members = getattr(owner, "members", None)  # a team's members (deep_copy copied them, sharing their models)
    for inner in [*(members if isinstance(members, (list, tuple)) else ()), getattr(owner, "reasoning_agent", None)]:
        if inner is not None and callable(getattr(inner, "deep_copy", None)):
            _own_models(inner, made, seen, shared)


def trial_copy(agent: Any, instructions: str) -> tuple[Any, list[Any]]:
    """A copy of `agent` that runs `instructions`, without post hooks or db, on models of its own;
    and those models, for `close_models` once the trial ends."""
    return copy_with(agent, {"instructions": instructions})


def copy_with(agent: Any, update: dict[str, Any], shared: dict[int, Any] | None = None) -> tuple[Any, list[Any]]:
    """A copy of `agent` with `update` applied, without post hooks or db, on models of its own (a
    model in `update` is copied too); and those models, for `close_models` once the copy has run.
    With `shared`, the models are the ones kept there (made on first use, never closed here), so
    many copies share their HTTP clients: a client of its own costs tens of milliseconds to make."""
    trial = agent.deep_copy(update={**update, "post_hooks": None, "db": None})
    made: list[Any] = []
    _own_models(trial, made, set(), shared)
    return trial, made


async def close_models(models: Sequence[Any]) -> None:
    """Close the HTTP clients the trial's models made (a dropped async client can hang other requests
    when it is collected on a live loop)."""
    for model in models:
        for name in ("async_client", "client"):
            client = getattr(model, name, None)
            close = getattr(client, "close", None)
            if not callable(close):
                continue
            try:
                done = close()
                if inspect.isawaitable(done):
                    await done
            except Exception as exc:  # a client that cannot close is no failure of the trial
                log.debug("trial_client_close_failed", model=getattr(model, "id", None), error=repr(exc)[:200])
