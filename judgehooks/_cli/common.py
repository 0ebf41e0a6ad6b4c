"""What the subcommands share when they run: opening a store with a one-line error, record filters,
importing the user's code, and calling the async stores from the command's thread (their options
are in `options`)."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any, TypeVar

from .._base.urls import redact
from .._evaluators.base import Evaluator
from .._runtime import runtime
from ..stores._base import RecordFilter, iter_records
from ..stores._url import ENV, default_store, default_store_url, store_from_url
from .deadletters import pending_jobs
from .options import CommandError

T = TypeVar("T")


def filters_of(args: argparse.Namespace) -> RecordFilter:
    """The records the filter options ask for."""
    return RecordFilter(agent_id=args.agent_id, team_id=args.team_id, evaluator=args.evaluator)


def call(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Run a store coroutine on the judgehooks loop, the one loop every store and judge here uses."""
    async def bound() -> T:
        return await fn(*args, **kwargs)

    return runtime.call(bound)


def open_store(url: str | None, *, must_exist: bool) -> Any:
    """The store `url` names (default: $JUDGEHOOKS_DB or ./judgehooks.db), checked with one read.
    ``must_exist``: a missing store file is an error, so a typo never reports on a new, empty database."""
    store = store_at(url, must_exist=must_exist)
    check_store(store, label_of(url))
    return store


def store_at(url: str | None, *, must_exist: bool) -> Any:
    """`open_store` without the read: the URL parsed and the store built, no I/O yet."""
    try:
        store = store_from_url(url) if url else default_store()  # $JUDGEHOOKS_DB: as the library reads it
        path = getattr(store, "path", None)
        if must_exist and isinstance(path, str) and path != ":memory:" and not os.path.exists(path):
            raise FileNotFoundError(f"no such file {path!r}{_left_beside(store, url)}")
    except Exception as exc:
        raise CommandError(f"cannot open store {label_of(url)}: {one_line(exc)}") from None
    return store


def _left_beside(store: Any, url: str | None) -> str:
    """What waits in the outbox of a store never written: a process that stopped before its first
    verdict was stored leaves its jobs there, and the store file does not exist yet."""
    found = pending_jobs(None, store)
    if not found["count"]:
        return ""
    each = ", ".join(f"{name} {n}" for name, n in found["by_evaluator"].items())
    return (f"; but the outbox {found['file']!r} beside it holds {found['count']} background job(s) waiting "
            f"({each}): grade them with `judgehooks resume --store {url or path_of(store)}` "
            "(add --import MODULE for evaluators built in code)")


def path_of(store: Any) -> str:
    return str(getattr(store, "path", "") or "")


def label_of(url: str | None) -> str:
    """The store URL as shown to people: the default filled in (saying when $JUDGEHOOKS_DB chose
    it), any password hidden."""
    if url:
        return redact(url)
    return f"{redact(default_store_url())} (from ${ENV})" if os.environ.get(ENV, "").strip() else default_store_url()


def read(label: str, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """`call` for reads: a store failing midway ends the command with one line, never a partial answer."""
    try:
        return call(fn, *args, **kwargs)
    except Exception as exc:
        raise CommandError(f"cannot read store {label}: {one_line(exc)}") from None


def check_store(store: Any, label: str) -> None:
    """One read, so an unreachable store fails the command at once with one line, not halfway through."""
    try:
        call(store.query, limit=1)
    except Exception as exc:
        raise CommandError(f"cannot open store {label}: {one_line(exc)}") from None


def one_line(exc: BaseException) -> str:
    """An exception as one line: its first line, prefixed with its type unless that says nothing new."""
    text = (str(exc).strip().splitlines() or [""])[0]
    if isinstance(exc, (ValueError, ImportError, FileNotFoundError, LookupError)) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def when(moment: datetime) -> str:
    """A record time for people: UTC, to the second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Plain aligned columns: text left, numbers right."""
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        out = []
        for cell, width in zip(cells, widths, strict=True):
            numeric = cell == "-" or bool(re.fullmatch(r"-?[\d.,]+%?", cell))
            out.append(cell.rjust(width) if numeric else cell.ljust(width))
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def clip(text: str, width: int) -> str:
    """Text on one line (whitespace runs collapsed), cut to `width` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def import_module(name: str, what: str) -> ModuleType:
    """Module `name` (``myapp.evals``), imported as ``python -m`` finds it: the working directory
    first, so code beside the application imports from its own folder under every command. Any
    failure (no such module, an error raised while it runs) ends the command with one line naming
    the module; `what` names the option (e.g. "worker: --import")."""
    if not _MODULE.fullmatch(name or ""):
        hint = f" (a dotted module name, e.g. {_dotted(name)})" if name.endswith(".py") or "/" in name else ""
        raise CommandError(f"{what} {name!r}: not a module name{hint}", code=2)
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` would: a console script's sys.path lacks the working directory
    importlib.invalidate_caches()  # a module written since the last import in this process
    try:
        return importlib.import_module(name)
    except Exception as exc:  # a raw traceback here would bury the one fact that matters: which module
        where = "" if isinstance(exc, ImportError) else " (raised while importing it)"
        raise CommandError(f"{what} {name}: {one_line(exc)}{where}", code=2) from None


_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _dotted(path: str) -> str:
    return path.removesuffix(".py").strip("./").replace("/", ".") or "myapp.evals"


def import_object(spec: str, what: str) -> Any:
    """`package.module:name` (dots allowed in name), the module imported by `import_module`.
    `what` names the option in errors (e.g. "grade: --import-evaluator")."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise CommandError(f"{what} must look like package.module:name, got {spec!r}", code=2)
    found: Any = import_module(module_name, what)
    try:
        for part in attr.split("."):
            found = getattr(found, part)
    except AttributeError as exc:
        raise CommandError(f"{what} {spec!r}: {exc}", code=2) from None
    return found


def module_evaluators(module: ModuleType) -> list[Evaluator]:
    """The judgehooks evaluators bound to `module`'s module-level names."""
    return [value for value in vars(module).values() if isinstance(value, Evaluator)]


#: how many of the newest records `unmatched` reads to say which agents, teams and evaluators exist
SCANNED = 5000
_FILTERS = (("agent", "agent_id", "agent_name", "--agent-id"), ("team", "team_id", "team_name", "--team-id"),
            ("evaluator", "evaluator", None, "--evaluator"))


async def unmatched(store: Any, where: RecordFilter) -> str | None:
    """Why `where` found nothing, when the reason is not the time window: the agent, team or
    evaluator filter that matches no record at any time, with what the store does hold. None when
    each filter matches some record (then the window, or the status, is what is empty)."""
    missing = [(kind, field, name_field, option) for kind, field, name_field, option in _FILTERS
               if getattr(where, field) is not None
               and not await store.query(**{field: getattr(where, field)}, limit=1)]
    if not missing:
        return None
    seen: dict[str, dict[str, str]] = {field: {} for _, field, _, _ in missing}
    async for record in _newest(store):
        for _, field, name_field, _ in missing:
            value = getattr(record, field)
            if value:
                seen[field].setdefault(value, (getattr(record, name_field) or "") if name_field else "")
    parts = []
    for kind, field, name_field, option in missing:
        wanted = getattr(where, field)
        known = seen[field]
        listed = ", ".join(f"{v} ({n})" if n and n != v else v for v, n in list(known.items())[:10])
        listed += ", ..." if len(known) > 10 else ""
        text = f"no records for {kind} {wanted!r} ({kind}s in the store: {listed or 'none'})"
        named = [v for v, n in known.items() if n == wanted]
        if named:
            text += f"; {wanted!r} is the name of {kind} {', '.join(named[:3])}: {option} takes the id, e.g. " \
                    f"{option} {named[0]}"
        elif name_field:
            text += (f"; {option} takes the {kind}'s id, and one built with neither id= nor name= is stored "
                     f"under unnamed-{kind}-<hash of its model, instructions and tools>, which changes when they "
                     f"do: give it one, e.g. {kind.capitalize()}(name={wanted!r}, ...) "
                     f"(agno derives the id from the name) or {kind.capitalize()}(id={wanted!r}, ...)")
        parts.append(text)
    return "; ".join(parts)


async def _newest(store: Any) -> Any:
    count = 0
    async for record in iter_records(store):
        yield record
        count += 1
        if count >= SCANNED:
            return
