"""Streaming statistics over records for `judgehooks report`: memory stays bounded by the number
of groups, distinct scores and worst failures kept, not by the number of records."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from math import isfinite
from typing import Any

from .._base.record import EvalRecord


def target(record: EvalRecord) -> tuple[str, str, str]:
    """What was graded: ("workflow", id, "name · step") for a run inside an agno Workflow (its step's
    agent or team, or the whole run without a step), ("agent", id, name), ("team", id, name), or
    ("offline", "", "") for batches."""
    flow = record.metadata.get("workflow_id") if isinstance(record.metadata, dict) else None
    if isinstance(flow, str) and flow:
        step = record.metadata.get("step_name")
        name = str(record.metadata.get("workflow_name") or flow)
        step_text = f"step {step}" if isinstance(step, str) and step else "whole run"
        return "workflow", f"{flow}/{step if isinstance(step, str) else ''}", f"{name} · {step_text}"
    if record.agent_id or record.agent_name:
        return "agent", record.agent_id or "", record.agent_name or ""
    if record.team_id or record.team_name:
        return "team", record.team_id or "", record.team_name or ""
    return "offline", "", ""


#: how records written before evaluator versions existed are shown
UNVERSIONED = "unversioned"


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


@dataclass
class Tally:
    """Counts, rates, scores and latency of one group of records."""

    count: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    weighted_passed: float = 0.0
    weighted_graded: float = 0.0
    scores: Counter[float] = field(default_factory=Counter)  # distinct value -> how many: an exact median
    latency_sum: float = 0.0
    latency_count: int = 0

    def add(self, record: EvalRecord) -> None:
        self.count += 1
        self.statuses[record.status] += 1
        if record.status in ("passed", "failed"):
            weight = 1.0 / record.sample_rate if record.sample_rate > 0 else 1.0
            self.weighted_graded += weight
            self.weighted_passed += weight if record.status == "passed" else 0.0
            if record.mode == "numeric" and record.score is not None and isfinite(record.score):
                self.scores[record.score] += 1  # NaN (a row another program wrote) would hide every score
        if record.latency_ms is not None and record.status != "skipped" and isfinite(record.latency_ms):
            self.latency_sum += record.latency_ms
            self.latency_count += 1

    def to_json(self) -> dict[str, Any]:
        passed, failed = self.statuses["passed"], self.statuses["failed"]
        return {
            "count": self.count, "passed": passed, "failed": failed,
            "error": self.statuses["error"], "skipped": self.statuses["skipped"],
            "pass_rate": _ratio(passed, passed + failed),
            "weighted_pass_rate": _ratio(self.weighted_passed, self.weighted_graded),
            "error_rate": _ratio(self.statuses["error"], self.count),
            "skip_rate": _ratio(self.statuses["skipped"], self.count),
            "score": self._score_stats(),
            "latency_ms_mean": _ratio(self.latency_sum, self.latency_count),
        }

    def _score_stats(self) -> dict[str, float | None]:
        n = sum(self.scores.values())
        if not n:
            return {"mean": None, "min": None, "p50": None, "max": None}
        values = sorted(self.scores)
        return {"mean": sum(v * c for v, c in self.scores.items()) / n, "min": values[0],
                "p50": _median(values, self.scores, n), "max": values[-1]}


def _median(values: list[float], counts: Counter[float], n: int) -> float:
    lower, upper = (n - 1) // 2, n // 2  # the two middle ranks (equal when n is odd)
    seen = 0
    low: float | None = None
    for value in values:
        seen += counts[value]
        if low is None and seen > lower:
            low = value
        if seen > upper:
            assert low is not None  # lower <= upper: low is set by now
            return (low + value) / 2
    raise AssertionError("unreachable")


_DISTINCT_ERRORS = 1000  # distinct error messages kept while counting
_TOP_ERRORS = 5  # shown in the report


@dataclass
class Report:
    """Tallies per (target, evaluator, evaluator version) and overall, plus the `worst`
    lowest-scored failures. With `all_versions`, one tally per evaluator pools its versions.
    Re-judged records (`judgehooks consistency`) are counted apart and never in a pass rate."""

    worst: int = 5
    all_versions: bool = False
    groups: dict[tuple[str, str, str, str], Tally] = field(default_factory=dict)
    names: dict[tuple[str, str, str, str], str] = field(default_factory=dict)
    versions: dict[tuple[str, str, str], set[str]] = field(default_factory=dict)
    total: Tally = field(default_factory=Tally)
    rejudged: int = 0
    failures: list[EvalRecord] = field(default_factory=list)
    errors: Counter[tuple[str, str]] = field(default_factory=Counter)  # (error_type, message) -> how many

    def add(self, record: EvalRecord) -> None:
        if record.rejudge_of is not None:
            self.rejudged += 1
            return
        if record.status == "error":
            self._count_error(record)
        kind, ident, name = target(record)
        version = record.evaluator_version or UNVERSIONED
        self.versions.setdefault((kind, ident, record.evaluator), set()).add(version)
        key = (kind, ident, record.evaluator, "" if self.all_versions else version)
        self.groups.setdefault(key, Tally()).add(record)
        self.names.setdefault(key, name)
        self.total.add(record)
        if record.status == "failed" and self.worst:
            self.failures.append(record)
            if len(self.failures) > 4 * self.worst:
                self._trim()

    def mixed(self) -> list[dict[str, Any]]:
        """The evaluators whose records in this window come from more than one version."""
        found = []
        for (kind, ident, evaluator), seen in sorted(self.versions.items()):
            if len(seen) > 1:
                name = next((n for k, n in self.names.items() if k[:3] == (kind, ident, evaluator)), "")
                found.append({"kind": kind, "id": ident or None, "name": name or None, "evaluator": evaluator,
                              "versions": sorted(seen)})
        return found

    def _count_error(self, record: EvalRecord) -> None:
        message = " ".join((record.error_message or "").split())[:300]
        self.errors[(record.error_type or "error", message)] += 1
        if len(self.errors) > _DISTINCT_ERRORS:  # bounded memory: forget the rarest half (counts become a floor)
            for key, _ in self.errors.most_common()[_DISTINCT_ERRORS // 2:]:
                del self.errors[key]

    def _trim(self) -> None:
        # Lowest numeric score first; failures without a score (binary) after them; newest first within.
        self.failures.sort(key=lambda r: -r.created_at.timestamp())
        self.failures.sort(key=lambda r: (r.score is None, r.score or 0.0))
        del self.failures[self.worst:]

    def to_json(self) -> dict[str, Any]:
        self._trim()
        groups = []
        for key in sorted(self.groups):
            kind, ident, evaluator, version = key
            groups.append({"kind": kind, "id": ident or None, "name": self.names[key] or None,
                           "evaluator": evaluator, "evaluator_version": version or None,
                           "versions": sorted(self.versions[(kind, ident, evaluator)]),
                           **self.groups[key].to_json()})
        return {"groups": groups, "total": self.total.to_json(), "rejudged": self.rejudged,
                "all_versions": self.all_versions, "mixed_versions": self.mixed(),
                "worst_failures": [_failure(r) for r in self.failures],
                "top_errors": [{"error_type": kind, "message": message, "count": n}
                               for (kind, message), n in self.errors.most_common(_TOP_ERRORS)]}


def _failure(record: EvalRecord) -> dict[str, Any]:
    kind, ident, name = target(record)
    return {"created_at": record.created_at.isoformat(), "evaluator": record.evaluator, "kind": kind,
            "id": ident or None, "name": name or None, "run_id": record.run_id, "score": record.score,
            "evaluator_version": record.evaluator_version,
            "threshold": record.threshold, "reason": record.reason, "record_id": record.id}
