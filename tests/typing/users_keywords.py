"""A user's code, type-checked by `.ci/run` (``mypy judgehooks tests/typing``, strict): every
evaluator's constructor takes the deployment keywords natively, and a misspelled keyword is a
mypy error. Each ``type: ignore[call-arg]`` below marks an error mypy must report: strict mode
warns about an unused ignore, so a constructor that stopped catching the typo fails the check.
Never run; only read by mypy."""

from __future__ import annotations

from judgehooks import AgentAsJudgeEval, Contains, EvalRecord, Group, MemoryStore, Regex, SessionJudge
from judgehooks.redact import PII


def page(record: EvalRecord) -> None: ...


def users_code() -> None:
    store = MemoryStore()
    check = Regex("^ok", flags="i", store=store, on_fail=page, run_in_background=False, max_calls=5)
    judge = AgentAsJudgeEval(criteria="c", store=store, on_error=page, max_calls=5, redact=PII, run_in_background=True)
    Group([check, judge], store=store, sample_rate=0.5, budget="team")
    SessionJudge("The assistant is polite.", idle_after=60, max_cost_usd=1.0, per="day")
    check.configure(on_fail=page, sample_rate=0.1)
    Regex("^ok", stor=store)  # type: ignore[call-arg]
    AgentAsJudgeEval(criteria="c", max_call=5)  # type: ignore[call-arg]
    Contains("x", on_fial=page)  # type: ignore[call-arg]
    check.configure(max_call=5)  # type: ignore[call-arg]
