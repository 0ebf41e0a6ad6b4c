"""What AgnoDbStore keeps in agno's eval table beyond agno's own shape, and reads back.

Everything we add to an eval run's ``eval_data`` sits under one key, ``judgehooks``, beside agno's
own AgentAsJudgeResult keys: a record's eval run carries the whole record as
``eval_data["judgehooks"]["record"]`` (its input and output only once: in agno's ``results`` when
it was graded), so `judgehooks report`, `calibrate` and
`review` can read an agno db. A human label is an eval run of its own: agno's eval table has no
place for one and no way to update a row's ``eval_data``, so each label is a row (model
``LABEL_MODEL``, no agent or team, so AgentOS's per-agent lists do not show it) whose id comes
from (record, reviewer, time). Writing a label removes that reviewer's older rows for the record
after the new one is in, so a crash in between leaves two rows and the newest still wins.

Rows are read from a database anyone may have written: a row that is not a whole record or label
is skipped with a warning naming it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from .._base.jsondata import record_data
from .._base.label import Label
from .._base.log import log
from .._base.record import EvalRecord

#: the one key of an eval run's ``eval_data`` that holds what we add to agno's own keys
KEY = "judgehooks"
#: the model id of label rows: what `get_eval_runs(model_id=...)` finds them by
LABEL_MODEL = "judgehooks-human-label"
LABEL_PROVIDER = "human"
LABEL_NAME = "judgehooks human label"
_TEXT = ("input", "output")


def ours(eval_data: Any, name: str) -> Any:
    """``eval_data["judgehooks"][name]``; or, for a row written before our additions moved under one
    key, ``eval_data[name]``. None when the row holds none (agno's own rows)."""
    if not isinstance(eval_data, Mapping):
        return None
    added = eval_data.get(KEY)
    return added.get(name) if isinstance(added, Mapping) else eval_data.get(name)


def record_payload(record: EvalRecord, graded: bool) -> dict[str, Any]:
    """The record as JSON data for ``eval_data["judgehooks"]["record"]``; without the input and
    output of a graded record, which agno's ``results`` already hold."""
    data = record_data(record)
    return {k: v for k, v in data.items() if not (graded and k in _TEXT)}


def record_of(run_id: str, eval_data: Any) -> EvalRecord | None:
    """The record an eval run holds; None for a row that holds none (agno's own eval runs, an
    offline batch, a label, or a row written before records were kept), with a warning when the
    row claims to hold one that does not read back."""
    held = ours(eval_data, "record")
    if not isinstance(held, Mapping):
        return None
    data = dict(held)
    results = eval_data.get("results")
    if isinstance(results, list) and results and isinstance(results[0], Mapping):
        for key in _TEXT:
            data.setdefault(key, results[0].get(key) or "")
    try:
        record = EvalRecord.model_validate(data)
    except (ValueError, TypeError) as exc:
        log.warning("agno_row_skipped", run_id=str(run_id)[:200], reason=str(exc)[:300])
        return None
    if record.id != run_id:  # a row must not speak for another record
        log.warning("agno_row_skipped", run_id=str(run_id)[:200], reason=f"it holds record {record.id[:200]!r}")
        return None
    return record


def label_run_id(label: Label) -> str:
    """The eval run id of one label row: the same label written twice is one row."""
    key = "\0".join((label.record_id, label.reviewer, label.data()["created_at"]))
    return f"label-{hashlib.sha256(key.encode()).hexdigest()[:32]}"


def label_payload(label: Label) -> dict[str, Any]:
    """``eval_data`` of a label row: agno's AgentAsJudgeResult fields (no graded results), and the
    label under ``judgehooks``."""
    return {"run_id": label_run_id(label), "results": [], "avg_score": label.score, "min_score": label.score,
            "max_score": label.score, "std_dev_score": None,
            "pass_rate": None if label.passed is None else 100.0 * label.passed, KEY: {"label": label.data()}}


def label_of(run_id: str, eval_data: Any) -> Label | None:
    """The label a label row holds; None, with a warning, when it holds none that reads back."""
    data = ours(eval_data, "label")
    try:
        if not isinstance(data, Mapping):
            raise ValueError("no label in its eval_data")
        label = Label.from_data(data)
    except (ValueError, TypeError) as exc:
        log.warning("agno_label_row_skipped", run_id=str(run_id)[:200], reason=str(exc)[:300])
        return None
    if label_run_id(label) != run_id:
        log.warning("agno_label_row_skipped", run_id=str(run_id)[:200], reason="its id does not match its label")
        return None
    return label


def newest(found: Iterable[tuple[str, Label]]) -> tuple[list[Label], list[str]]:
    """The newest label per (record, reviewer), and the ids of the rows it replaces."""
    best: dict[tuple[str, str], tuple[str, Label]] = {}
    stale: list[str] = []
    for run_id, label in found:
        key = (label.record_id, label.reviewer)
        held = best.get(key)
        if held is None or (label.created_at, run_id) > (held[1].created_at, held[0]):
            if held is not None:
                stale.append(held[0])
            best[key] = (run_id, label)
        else:
            stale.append(run_id)
    return [label for _, label in best.values()], stale
