"""AgentAsJudgeResult: the outcome of an offline `run()` / `arun()`, shaped like agno's."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .record import EvalRecord


@dataclass
class AgentAsJudgeResult:
    """agno's `AgentAsJudgeResult`: the per-case records (``results``) plus statistics over the
    *graded* cases (passed or failed), with judgehooks' counts as extra fields.

    Errors and skips never count toward the pass rate; they are reported beside it, so a batch
    with judge errors cannot look healthier than it was. ``pass_rate`` is a percentage, as in
    agno, and None when nothing was graded (agno says 0.0, which reads as "all failed").
    """

    run_id: str
    results: list[EvalRecord] = field(default_factory=list)
    avg_score: float | None = field(init=False, default=None)
    min_score: float | None = field(init=False, default=None)
    max_score: float | None = field(init=False, default=None)
    std_dev_score: float | None = field(init=False, default=None)
    pass_rate: float | None = field(init=False, default=None)
    graded_count: int = field(init=False, default=0)
    error_count: int = field(init=False, default=0)
    skipped_count: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.compute_stats()

    @property
    def records(self) -> list[EvalRecord]:
        """Every record of the batch, whatever its status (the same list as ``results``)."""
        return self.results

    @property
    def errors(self) -> list[EvalRecord]:
        return [r for r in self.results if r.status == "error"]

    def compute_stats(self) -> None:
        import statistics

        graded = [r for r in self.results if r.status in ("passed", "failed")]
        self.graded_count = len(graded)
        self.error_count = sum(r.status == "error" for r in self.results)
        self.skipped_count = sum(r.status == "skipped" for r in self.results)
        self.pass_rate = (100.0 * sum(r.status == "passed" for r in graded) / len(graded)) if graded else None
        scores = [r.score for r in graded if r.score is not None]
        if scores:
            self.avg_score = statistics.mean(scores)
            self.min_score, self.max_score = min(scores), max(scores)
            self.std_dev_score = statistics.stdev(scores) if len(scores) > 1 else 0.0
        else:
            self.avg_score = self.min_score = self.max_score = self.std_dev_score = None

    def print_summary(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="[ Agent As Judge Evaluation Summary ]", show_header=False)
        table.add_row("Number of Evaluations", str(len(self.results)))
        table.add_row("Graded", str(self.graded_count))
        table.add_row("Pass rate (graded)", "-" if self.pass_rate is None else f"{self.pass_rate:.1f}%")
        table.add_row("Errors", str(self.error_count))
        if self.skipped_count:
            table.add_row("Skipped", str(self.skipped_count))
        if self.avg_score is not None:
            table.add_row("Score avg / min / max", f"{self.avg_score:.2f} / {self.min_score:g} / {self.max_score:g}")
            table.add_row("Score std dev", f"{self.std_dev_score:.2f}")
        (console or Console()).print(table)

    def print_results(self, console: Any = None) -> None:
        """Each evaluation as agno prints it (`EvalRecord.print_eval`)."""
        for record in self.results:
            record.print_eval(console)

    def to_json(self) -> dict[str, Any]:
        """JSON data shaped like agno's ``asdict(result)`` (what agno writes to
        ``file_path_to_save_results`` and to the db), with judgehooks' counts beside it."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["results"] = [r.model_dump(mode="json", fallback=str) for r in self.results]
        return data
