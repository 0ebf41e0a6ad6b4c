"""A session page's conversation: its turns in order, from the records and agno's db, with each
session verdict beside the turns it covers."""

from __future__ import annotations

from typing import Any

from .._base.record import EvalRecord
from .._base.session import Turn


def conversation(found: list[EvalRecord], graded: list[EvalRecord],
                 stored: tuple[Turn, ...] = ()) -> list[dict[str, Any]]:
    """The session's turns in order: agno's (when its db is given: every run, its input and answer),
    then each run its session verdicts covered (oldest window first), then any other run with
    records. Each turn has its input and output where a record keeps them (a run record keeps its
    own; a session record its first turn's input and its last turn's output), else agno's; its run
    records; the session verdicts whose window covers it (`covered`) and those whose window ends
    with it (`ends`, shown beside it)."""
    runs: dict[str, list[EvalRecord]] = {}
    for record in reversed(found):  # oldest first
        if record.scope == "run":
            runs.setdefault(record.run_id or "", []).append(record)
    turns: dict[str, dict[str, Any]] = {}

    def turn_of(run: str) -> dict[str, Any]:
        return turns.setdefault(run, {"run": run, "input": None, "output": None, "records": [], "covered": [],
                                      "ends": [], "from_db": False})

    for kept in stored:
        turn_of(kept.run.run_id or "").update(input=kept.run.input, output=kept.run.output, from_db=True)
    for window in reversed(graded):  # oldest first
        for i, run in enumerate(window.run_ids):
            turn = turn_of(run)
            turn["covered"].append(window)
            if i == 0 and not turn["from_db"]:
                turn["input"] = window.input
            if i == len(window.run_ids) - 1:
                turn["ends"].append(window)
                if not turn["from_db"]:
                    turn["output"] = window.output
    for run, records in runs.items():
        turn_of(run).update(input=records[0].input, output=records[0].output, records=records)
    return list(turns.values())
