"""store_from_url: one string names a store, for the command line and for configuration files."""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ._memory import MemoryStore
from ._sqlite import SQLiteStore

SUPPORTED = ("sqlite:///path.db", "postgresql://...", "jsonl:///path.jsonl", "memory://",
             "agno+sqlite:///agno.db or agno+postgresql://... (an agno db's eval table)",
             "or a file path (.jsonl: JSONL, else SQLite)")


def store_from_url(url: str) -> Any:
    """The store a URL or path names. Paths after ``scheme://`` are relative, as in SQLAlchemy
    (``sqlite:///evals.db``); add a slash for an absolute one (``sqlite:////var/lib/evals.db``).

    Raises ValueError for an unknown scheme and ImportError, naming the extra to install, when
    the store's optional dependencies are missing.
    """

    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"store URL must be a non-empty string, got {url!r}")
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _jsonl_store(url) if url.endswith(".jsonl") else SQLiteStore(url)
    scheme = scheme.lower()
    if scheme == "sqlite":
        return SQLiteStore(_path(rest, "judgehooks.db"))
    if scheme.split("+", 1)[0] in ("postgresql", "postgres"):
        store_class = _optional("judgehooks.stores._postgres", "PostgresStore", 'pip install "judgehooks[postgres]"')
        return store_class(f"postgresql://{rest}")  # SQLAlchemy's postgresql+psycopg:// means the same server
    if scheme == "jsonl":
        return _jsonl_store(_path(rest, "judgehooks.jsonl"))
    if scheme == "memory":
        return MemoryStore()
    if scheme.startswith("agno+"):
        return _agno_store(f"{scheme[5:]}://{rest}")
    raise ValueError(f"unsupported store URL scheme {scheme!r} in {redact(url)!r} "
                     f"(supported: {', '.join(SUPPORTED)})")


def redact(url: str) -> str:
    """The URL with its password replaced by ***, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _path(rest: str, default: str) -> str:
    # sqlite:///evals.db -> "evals.db"; sqlite:////abs/evals.db -> "/abs/evals.db"; sqlite://evals.db too.
    path = rest[1:] if rest.startswith("/") else rest
    return path or default


def _jsonl_store(path: str) -> Any:
    return _optional("judgehooks.stores._jsonl", "JsonlStore", "pip install -U judgehooks")(path)


def _agno_store(url: str) -> Any:
    """An AgnoDbStore over the agno db `url` names (`path` set for a SQLite file, so a command can
    refuse a file that is not there)."""
    module = importlib.import_module("judgehooks.stores._agno")
    try:
        store = module.AgnoDbStore(module.open_agno_db(url))
    except ImportError as exc:
        postgres = url.lower().startswith("postgres")
        fix = 'pip install "judgehooks[postgres]"' if postgres else "pip install -U judgehooks"
        raise ImportError(f"AgnoDbStore is not available ({getattr(exc, 'name', None) or exc} is not installed): "
                          f"{fix}") from exc
    if url.lower().startswith("sqlite://"):
        store.path = _path(url.partition("://")[2], "agno.db")
    return store


def _optional(module: str, name: str, fix: str) -> Any:
    """A store class whose module (or its dependencies) may not be installed."""
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise ImportError(f"{name} is not available ({missing} is not installed): {fix}") from exc
