"""The admission path's one registry: its steps in order, each control with the ONE step that
applies it, and the paths every evaluator kind takes through it.

    snapshot -> redact -> sample -> dispatch -> admit -> grade -> deliver

`snapshot`, `redact` and `sample` are `HookShell.admit` (`judgehooks._hooks.shell`), for run-level
and session evaluators alike; `dispatch` hands the run to inline grading, the background queue,
Redis or a session's clock; `admit` and `grade` are `Pipeline.grade` (the spend caps, then every
judge call metered and paced); `deliver` is `Pipeline.deliver` (store, callbacks, OpenTelemetry
event). Offline `run()` / `arun()` enter at `redact`; `resume` and Redis workers at `admit`, with
what the queueing process snapshotted, redacted and sampled.

The kinds x paths x controls test (`tests/grading/test_matrix.py`) builds its matrix from these
tuples and fails on a control or a path that has no cells there: a new control is a step here
and a row there.
"""

from __future__ import annotations

from dataclasses import dataclass

STEPS = ("snapshot", "redact", "sample", "dispatch", "admit", "grade", "deliver")


@dataclass(frozen=True, slots=True)
class Control:
    """A control: its setting(s), the one step that applies it, and the code that is that step."""

    name: str
    step: str
    applied_by: str

    def __post_init__(self) -> None:
        if self.step not in STEPS:
            raise ValueError(f"control {self.name!r}: unknown step {self.step!r}")


CONTROLS = (
    Control("redact", "redact", "HookShell.take (snapshot_run / snapshot_turn); offline: HookShell._offline"),
    Control("sampling", "sample", "HookShell.admit: Sampler.decide (a session evaluator: by session)"),
    Control("duplicate_check", "dispatch", "Pipeline.stored: a job or session window whose record is stored is "
            "dropped unjudged (Dispatcher._take for the queue and resume, Worker.grade, grade_window)"),
    Control("spend_cap", "admit", "Pipeline.grade: SpendCap.admit, then Meter.admit_call per judge call"),
    Control("metering", "grade", "Meter.admit_call / add_cost: every judge call, retries included"),
    Control("requests_per_minute", "grade", "Meter.admit_call: Pace.wait, per judge model"),
    Control("review_routing", "grade", "Pipeline.grade: make_record with the live pipeline's Review (a verdict in "
            "doubt gets its review_reason); offline grades have none"),
    Control("reply_cap", "grade", "the judge transport: a reply past its size limit is an error"),
    Control("gate", "deliver", "HookShell.post_check: Gate.enforce on the delivered record (inline only)"),
    Control("callbacks", "deliver", "Pipeline.notify: on_fail / on_error / on_drop / on_record"),
    Control("otel_event", "deliver", "Pipeline.deliver: tracing.emit"),
)

#: the ways a run reaches grading
PATHS = ("inline", "background", "judge_process", "redis_worker", "offline", "resume")
