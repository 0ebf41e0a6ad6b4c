"""`label()` / `alabel()`: a person's verdict on a stored record, kept beside it in the same store;
`import_labels`: many at once from JSON lines (``{"record_id" | "run_id", "passed" | "score"}``);
`feedback()` / `afeedback()`: an end user's thumb or number on a run, kept apart from the labels."""

from __future__ import annotations

import functools
import getpass
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._base.feedback import Feedback
from .._base.label import Label
from .._base.record import EvalRecord
from .._runtime import runtime
from ._base import BaseStore, Store
from ._url import default_store

#: the longest line `import_labels` reads, in characters: one label is a few hundred
MAX_LINE_CHARS = 65_536

#: The review keys, one set for `judgehooks review` and the web app's review page (one key each).
PASS_KEY, FAIL_KEY, SKIP_KEY = "p", "f", "n"
#: `judgehooks review` only (the page has no score field, and no quitting): ``s 7`` labels a score
SCORE_KEY, QUIT_KEY = "s", "q"
#: what `judgehooks review` took before the keys were one set, still understood there: agree and
#: disagree with the judge, and skip
OLD_KEYS = {"a": "agree", "d": "disagree", "k": "skip"}


def default_reviewer() -> str:
    """Who labels when ``by`` is not given: the login name."""
    try:
        return getpass.getuser() or "anonymous"
    except Exception:  # no login name (a container without a passwd entry)
        return "anonymous"


def _labelling(store: Store | None) -> BaseStore:
    store = store if store is not None else default_store()
    if not isinstance(store, BaseStore):
        raise TypeError(f"labels and feedback are kept by judgehooks stores (BaseStore subclasses), "
                        f"got {type(store).__name__}")
    return store


async def alabel(record_id: str, *, passed: bool | None = None, score: float | None = None, note: str | None = None,
                 by: str | None = None, store: Store | None = None) -> Label:
    """Keep a person's verdict on the record `record_id` beside it in `store` (default: the default
    SQLite store), as reviewer `by` (default: the login name). Labelling the same record again as
    the same reviewer replaces that reviewer's label. Raises LookupError when the store has no such
    record, ValueError for a label without passed or score."""
    store = _labelling(store)
    new = Label(record_id=record_id, reviewer=by or default_reviewer(), passed=passed, score=score, note=note)
    if not await store.records_by_id([record_id]):
        raise LookupError(f"no record {record_id!r} in {store!r}: label records by the id `judgehooks report` "
                          "and `judgehooks tail` show")
    await store.write_labels([new])
    return new


def label(record_id: str, *, passed: bool | None = None, score: float | None = None, note: str | None = None,
          by: str | None = None, store: Store | None = None) -> Label:
    """`alabel` for sync callers (run on the judgehooks loop)."""
    return runtime.call(functools.partial(alabel, record_id, passed=passed, score=score, note=note, by=by,
                                          store=store))


async def afeedback(run_id: str, value: str | float, *, comment: str | None = None, user_id: str | None = None,
                    store: Store | None = None) -> Feedback:
    """Keep an end user's feedback on the run `run_id` in `store` (default: the store the hooks
    use, $JUDGEHOOKS_DB or ./judgehooks.db): `value` is ``"up"``, ``"down"`` or a finite number.
    It is kept with ``source="user"`` beside the run's verdicts, apart from reviewers' labels
    (`calibrate` never counts it). A run the store has no record of is fine: feedback may come
    before a background verdict is stored, or for a run no evaluator sampled. A named `user_id`
    who gives feedback on the run again replaces their earlier feedback. Raises ValueError naming
    a bad value, comment or id."""
    item = Feedback(run_id=run_id, value=value, comment=comment, user_id=user_id)  # checked before any store
    await _labelling(store).write_feedback([item])
    return item


def feedback(run_id: str, value: str | float, *, comment: str | None = None, user_id: str | None = None,
             store: Store | None = None) -> Feedback:
    """`afeedback` for sync callers (run on the judgehooks loop)."""
    return runtime.call(functools.partial(afeedback, run_id, value, comment=comment, user_id=user_id, store=store))


@dataclass
class Imported:
    """What `import_labels` did: the labels stored, and one message per line it could not use."""

    labels: list[Label] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class _Wanted:
    line: int
    fields: dict[str, Any]
    record_id: str | None
    run_id: str | None
    evaluator: str | None


def _read_line(number: int, text: str) -> _Wanted:
    """One line as a wanted label; ValueError saying what is wrong with it."""
    if len(text) > MAX_LINE_CHARS:
        raise ValueError(f"longer than {MAX_LINE_CHARS} characters")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise ValueError("JSON nested deeper than Python can read") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"a JSON object is needed, got {type(data).__name__}")
    unknown = sorted(set(data) - {"record_id", "run_id", "evaluator", "passed", "score", "note", "by"})
    if unknown:
        raise ValueError(f"unknown keys {unknown} (allowed: record_id or run_id, evaluator, passed, score, note, by)")
    record_id, run_id, evaluator = data.get("record_id"), data.get("run_id"), data.get("evaluator")
    if (record_id is None) == (run_id is None):
        raise ValueError('give exactly one of "record_id" and "run_id"')
    for key, value in (("record_id", record_id), ("run_id", run_id), ("evaluator", evaluator), ("by", data.get("by"))):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f'"{key}" must be a non-empty string, got {value!r:.80}')
    fields = {"passed": data.get("passed"), "score": data.get("score"), "note": data.get("note"),
              "reviewer": data.get("by")}
    Label(record_id=str(record_id or run_id), reviewer=fields["reviewer"] or "check", passed=fields["passed"],
          score=fields["score"], note=fields["note"])  # checks the verdict now, naming the line
    return _Wanted(number, fields, record_id, run_id, evaluator)


async def _resolve(store: BaseStore, wanted: _Wanted) -> str:
    """The record a run_id line is about: the run's one record (of `evaluator` when given)."""
    found = [r for r in await store.query(run_id=wanted.run_id, evaluator=wanted.evaluator, limit=None)
             if r.rejudge_of is None]
    evaluators = sorted({r.evaluator for r in found})
    if not found:
        which = f" of evaluator {wanted.evaluator!r}" if wanted.evaluator else ""
        raise LookupError(f"no record{which} for run {wanted.run_id!r}")
    if len(evaluators) > 1:
        raise LookupError(f"run {wanted.run_id!r} has records of {len(evaluators)} evaluators "
                          f"({', '.join(evaluators)}): say which with \"evaluator\"")
    if len(found) > 1:  # an offline batch: one run, many cases
        raise LookupError(f"run {wanted.run_id!r} has {len(found)} records: label them by record_id")
    return found[0].id


async def aimport_labels(lines: Iterable[str], *, store: Store | None = None, by: str | None = None) -> Imported:
    """Labels from JSON lines, each ``{"record_id": ...}`` or ``{"run_id": ..., "evaluator": ...}``
    with ``"passed"`` and/or ``"score"`` (and optionally ``"note"``, ``"by"``). Every usable line
    is stored; every other one is reported by number with what is wrong (nothing is dropped silently)."""
    store = _labelling(store)
    reviewer = by or default_reviewer()
    result = Imported()
    wanted: list[_Wanted] = []
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            wanted.append(_read_line(number, text))
        except (ValueError, TypeError) as exc:
            result.errors.append(f"line {number}: {exc}")
    known: set[str] = {r.id for r in await store.records_by_id([w.record_id for w in wanted if w.record_id])}
    for item in wanted:
        try:
            record_id = item.record_id if item.record_id is not None else await _resolve(store, item)
            if record_id not in known and item.record_id is not None:
                raise LookupError(f"no record {record_id!r} in the store")
            fields = {**item.fields, "reviewer": item.fields["reviewer"] or reviewer}
            result.labels.append(Label(record_id=record_id, **fields))
        except (LookupError, ValueError) as exc:
            result.errors.append(f"line {item.line}: {exc}")
    await store.write_labels(result.labels)
    result.errors.sort(key=lambda e: int(e.split(":", 1)[0].removeprefix("line ")))  # in file order
    return result


def labelled(records: Iterable[EvalRecord], labels: Iterable[Label]) -> dict[str, list[Label]]:
    """The labels of each of `records` that has any, by record id."""
    ids = {r.id for r in records}
    found: dict[str, list[Label]] = {}
    for item in labels:
        if item.record_id in ids:
            found.setdefault(item.record_id, []).append(item)
    return found
