"""store_from_url: one string names a store, for the command line, configuration files and
``$JUDGEHOOKS_DB``, which the library and every command read the same way (`default_store`)."""

from __future__ import annotations

import importlib
import os
from typing import Any

from .._base.sqlitefile import checked_path
from .._base.urls import redact
from ._memory import MemoryStore
from ._sqlite import SQLiteStore

SUPPORTED = ("sqlite:///path.db", "postgresql://...", "jsonl:///path.jsonl", "memory://",
             "agno+sqlite:///agno.db or agno+postgresql://... (an agno db's eval table)",
             "or a file path (.jsonl: JSONL, else SQLite)")


#: the environment variable naming the store used when none is given, in the library and the CLI
ENV = "JUDGEHOOKS_DB"
#: the store used when none is given and $JUDGEHOOKS_DB is not set: a SQLite file in the working directory
DEFAULT = "judgehooks.db"


def default_store_url() -> str:
    """The store URL used when none is given: $JUDGEHOOKS_DB, else ``judgehooks.db`` (not checked)."""
    return os.environ.get(ENV, "").strip() or DEFAULT


def check_default_store_url() -> str:
    """`default_store_url()`, refused at once (ValueError naming $JUDGEHOOKS_DB) when no store
    answers to it or its file could not be created, so a typo fails where the evaluator is built,
    not inside a hook that agno would swallow. Builds nothing."""
    url = default_store_url()
    try:
        check_store_url(url)
    except ValueError as exc:
        raise ValueError(_from_env(url, exc)) from None
    return url


def check_store_url(url: str) -> None:
    """Refuse (ValueError) a store URL or path that `store_from_url` would refuse without
    connecting anywhere: a scheme no store answers to, or a file whose folder does not exist (so
    no write could ever succeed). Builds nothing, opens nothing."""
    path = _local_file(_scheme(url), url)
    if path is not None:
        _checked(path, url)


def _local_file(scheme: str, url: str) -> str | None:
    """The file a store URL names on this machine (None for a server, memory or an in-memory db)."""
    rest = url.partition("://")[2]
    if not scheme:
        return url
    if scheme in ("sqlite", "agno+sqlite"):
        path = _path(rest, "agno.db" if scheme.startswith("agno+") else "judgehooks.db")
        return None if path == ":memory:" else path
    if scheme == "jsonl":
        return _path(rest, "judgehooks.jsonl")
    return None


def _checked(path: str, url: str) -> str:
    """`path`, refused when its folder is missing; a path that reads like a URL missing its slashes
    (``sqlite:/x.db``, ``sqlite:x.db``) says how a URL is written."""
    try:
        return checked_path(path, "store")
    except ValueError as exc:
        scheme, colon, rest = url.partition(":")
        if colon and not rest.startswith("//") and _is_scheme(scheme.lower()):
            raise ValueError(f"{exc}; {url!r} is read as a file path: a store URL is written "
                             f"{scheme}:///{rest.lstrip('/')} (a relative path) or {scheme}:////{rest.lstrip('/')} "
                             "(an absolute one)") from None
        raise


def default_store() -> Any:
    """The store used when none is given, in the library and in every command: $JUDGEHOOKS_DB read
    by `store_from_url` (a URL or a file path), else ``./judgehooks.db``. Errors name $JUDGEHOOKS_DB."""
    return default_store_at(check_default_store_url())


def default_store_at(url: str) -> Any:
    """The store `url` names, `url` being what `default_store_url()` gave: errors name $JUDGEHOOKS_DB."""
    try:
        return store_from_url(url)
    except (ValueError, ImportError) as exc:
        raise type(exc)(_from_env(url, exc)) from exc


def _from_env(url: str, exc: BaseException) -> str:
    if url == DEFAULT and not os.environ.get(ENV, "").strip():
        return str(exc)
    return (f"${ENV}={redact(url)!r}: {exc} (${ENV} takes what `judgehooks --store` takes: a store URL "
            f"or a file path)")


def _scheme(url: str) -> str:
    """The store kind `url` names: its lower-cased scheme, or "" for a file path. ValueError for a
    string no store answers to."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"store URL must be a non-empty string, got {url!r}")
    scheme, sep, _ = url.partition("://")
    if not sep:
        return ""
    scheme = scheme.lower()
    if _is_scheme(scheme):
        return scheme
    raise ValueError(f"unsupported store URL scheme {scheme!r} in {redact(url)!r} "
                     f"(supported: {', '.join(SUPPORTED)})")


def _is_scheme(scheme: str) -> bool:
    return scheme in ("sqlite", "jsonl", "memory") or scheme.split("+", 1)[0] in ("postgresql", "postgres") \
        or scheme.startswith("agno+")


def store_from_url(url: str) -> Any:
    """The store a URL or path names. Paths after ``scheme://`` are relative, as in SQLAlchemy
    (``sqlite:///evals.db``); add a slash for an absolute one (``sqlite:////var/lib/evals.db``).

    Raises ValueError for an unknown scheme and ImportError, naming the extra to install, when
    the store's optional dependencies are missing.
    """

    check_store_url(url)
    scheme = _scheme(url)
    if not scheme:
        return _jsonl_store(url) if url.endswith(".jsonl") else SQLiteStore(url)
    rest = url.partition("://")[2]
    if scheme == "sqlite":
        return SQLiteStore(_path(rest, "judgehooks.db"))
    if scheme.split("+", 1)[0] in ("postgresql", "postgres"):
        store_class = _optional("judgehooks.stores._postgres", "PostgresStore", 'pip install "judgehooks[postgres]"')
        return store_class(f"postgresql://{rest}")  # SQLAlchemy's postgresql+psycopg:// means the same server
    if scheme == "jsonl":
        return _jsonl_store(_path(rest, "judgehooks.jsonl"))
    if scheme == "memory":
        return MemoryStore()
    return _agno_store(f"{scheme[5:]}://{rest}")  # agno+...: _scheme refused every other scheme


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
