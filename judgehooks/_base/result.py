"""AgentAsJudgeEvaluation and AgentAsJudgeResult: one evaluation and the outcome of an offline
`run()` / `arun()`, shaped like agno's (`agno.eval.agent_as_judge`)."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field, fields
from typing import Any

from .record import EvalRecord, print_evaluation


@dataclass
class AgentAsJudgeEvaluation(abc.ABC):
    """agno's `AgentAsJudgeEvaluation`: one evaluation's six fields, in agno's order, and
    `print_eval()`. Every `EvalRecord` is one (a registered virtual subclass: what `on_fail`
    receives and what `AgentAsJudgeResult.results` holds pass `isinstance`), and carries the
    record's other fields besides; construct this class yourself where agno's code does (a test's
    expected value, a custom evaluator's result)."""

    input: str
    output: str
    criteria: str
    score: int | None
    reason: str
    passed: bool

    @property
    def status(self) -> str:
        """A record's status: an evaluation built from agno's fields is always graded."""
        return "passed" if self.passed else "failed"

    def print_eval(self, console: Any = None) -> None:
        """Print this evaluation as agno's `print_eval` does."""
        print_evaluation(console, input=self.input, output=self.output, status=self.status, reason=self.reason,
                         score=None if self.score is None else f"{self.score}/10")


AgentAsJudgeEvaluation.register(EvalRecord)


@dataclass
class AgentAsJudgeResult:
    """agno's `AgentAsJudgeResult`: the per-case records (``results``) plus statistics over the
    *graded* cases (passed or failed), with judgehooks' counts as extra fields.

    Errors and skips never count toward the pass rate; they are reported beside it, so a batch
    with judge errors cannot look healthier than it was. ``pass_rate`` is a percentage, as in
    agno, and None when nothing was graded (agno says 0.0, which reads as "all failed");
    ``pass_fraction`` is the same rate in the unit of every rate judgehooks itself reports (0-1).
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
    #: the full mark the summary prints after scores ("8.00/10"): the grading evaluator's scale
    out_of: float | None = field(init=False, default=10.0, repr=False)

    def __post_init__(self) -> None:
        self.compute_stats()

    @property
    def records(self) -> list[EvalRecord]:
        """Every record of the batch, whatever its status (the same list as ``results``)."""
        return self.results

    @property
    def pass_fraction(self) -> float | None:
        """The pass rate from 0 to 1, as `judgehooks report`, `grade --json`, alerts and
        `calibrate` give every rate (``pass_rate`` stays agno's percentage)."""
        return None if self.pass_rate is None else self.pass_rate / 100.0

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
        """agno's summary table, row for row; beyond agno's rows, the errors and skips when there are
        any (they are not in the pass rate), and "-" for the pass rate when nothing was graded."""
        from rich.box import ROUNDED
        from rich.console import Console
        from rich.table import Table

        table = Table(box=ROUNDED, border_style="blue", show_header=False,
                      title="[ Agent As Judge Evaluation Summary ]", title_style="bold sky_blue1",
                      title_justify="center", padding=(0, 2), min_width=45)
        table.add_row("Number of Evaluations", str(len(self.results)))
        table.add_row("Pass Rate", "-" if self.pass_rate is None else f"{self.pass_rate:.1f}%")
        if self.error_count:
            table.add_row("Errors", f"{self.error_count} (not in the pass rate)")
        if self.skipped_count:
            table.add_row("Skipped", f"{self.skipped_count} (not in the pass rate)")
        if self.avg_score is not None:
            mark = f"/{self.out_of:g}" if self.out_of else ""
            if self.graded_count == 1:
                table.add_row("Score", f"{self.avg_score:.2f}{mark}")
            else:
                table.add_row("Average Score", f"{self.avg_score:.2f}{mark}")
                table.add_row("Min Score", f"{self.min_score:.2f}{mark}")
                table.add_row("Max Score", f"{self.max_score:.2f}{mark}")
                if self.std_dev_score:
                    table.add_row("Std Deviation", f"{self.std_dev_score:.2f}")
        (console or Console()).print(table)

    def print_results(self, console: Any = None) -> None:
        """Each evaluation as agno prints it (`EvalRecord.print_eval`)."""
        for record in self.results:
            record.print_eval(console)

    def to_json(self) -> dict[str, Any]:
        """JSON data shaped like agno's ``asdict(result)`` (what agno writes to
        ``file_path_to_save_results`` and to the db), with judgehooks' counts beside it."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "out_of"}
        data["results"] = [r.model_dump(mode="json", fallback=str) for r in self.results]
        return data
