"""`judgehooks report`'s judge cost: per evaluator, per UTC day, what its judge calls cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import isfinite
from typing import Any

from .._base.record import EvalRecord
from .common import clip, table


@dataclass
class JudgeCost:
    """Per (day, evaluator): judge calls, their known cost, calls with no price, runs over budget."""

    rows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def add(self, record: EvalRecord) -> None:
        row = self.rows.setdefault((record.created_at.date().isoformat(), record.evaluator),
                                   {"calls": 0, "cost_usd": 0.0, "unpriced": 0, "over_budget": 0})
        if record.status == "skipped" and record.reason == "budget":
            row["over_budget"] += 1
        if record.judge_model is None and record.cost_usd is None:
            return  # no judge call: a check, a shed run, a redaction error
        row["calls"] += max(1, record.attempts)
        if record.cost_usd is None or not isfinite(record.cost_usd):  # NaN or inf: no price anyone can add up
            row["unpriced"] += 1
        else:
            row["cost_usd"] += record.cost_usd

    def to_json(self) -> list[dict[str, Any]]:
        return [{"day": day, "evaluator": evaluator, **row, "cost_usd": round(row["cost_usd"], 6)}
                for (day, evaluator), row in sorted(self.rows.items())]


def render(rows: list[dict[str, Any]]) -> list[str]:
    """The table's lines (none when no record in the window called a judge or met a cap)."""
    shown = [r for r in rows if r["calls"] or r["over_budget"]]
    if not shown:
        return []
    cells = [[r["day"], clip(r["evaluator"], 40), str(r["calls"]), f"{r['cost_usd']:.4f}", str(r["unpriced"]),
              str(r["over_budget"])] for r in shown]
    return ["", "judge cost per evaluator per day (UTC):",
            *("  " + line for line in table(["day", "evaluator", "calls", "usd", "unpriced", "budget"],
                                            cells).splitlines()),
            "usd = judge cost where litellm knows the model's price; unpriced = judged records without one;",
            "budget = runs not judged over a spend cap (max_cost_usd / max_calls)"]
