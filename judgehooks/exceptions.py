"""Every judgehooks exception, in one tree (as httpx draws its own).

Judge and evaluator failures become `error` records, never failures; these names end up in a
record's ``error_type``. Raised to callers: `StoreError` (after the callbacks, when the store is
down and nothing can hold the records), construction errors (`ValueError` / `TypeError` naming the
parameter), `NotRebuildable` and `LocalModelUnavailable`.

    JudgehooksError
    ├── JudgeError                  the model that grades could not give a verdict
    │   ├── MalformedVerdict        it answered, but not with a verdict we can read
    │   │   └── VerdictCut          its reply stopped at max_tokens before the verdict ended
    │   ├── JudgeUnavailable        it could not be reached or refused the request
    │   │   └── JudgeProcessDied    the helper judge process exited with calls in flight
    │   └── RemoteJudgeError        raised in the judge process; keeps the original's type and status
    ├── EvaluatorError              an evaluator could not reach a verdict for this run
    │   ├── BadOutcome              evaluate() returned something that is not a verdict
    │   ├── MissingContext          the run carried none of the context a judge grades against
    │   ├── MissingExpected         a comparison had no expected value for this run
    │   ├── MissingMetrics          the run's metrics lack a figure a budget needs
    │   ├── MemberError             a member of a composite reached no verdict
    │   └── EvaluatorUnavailable    a worker can neither rebuild nor find a job's evaluator
    ├── StoreError                  a store could not write or read records (after retries)
    ├── RedactionError              the redactor raised: the run's text was withheld, not graded
    ├── NotRebuildable              (also a ValueError) a job's spec cannot rebuild its evaluator here
    └── LocalModelUnavailable       the local model cannot be served (not installed, did not start)
"""

from __future__ import annotations

from typing import Any


class JudgehooksError(Exception):
    """Base class of judgehooks' own errors."""


class JudgeError(JudgehooksError):
    """The model that grades could not give a verdict."""


class MalformedVerdict(JudgeError):
    """The judge answered, but not with a verdict we can read."""


class VerdictCut(MalformedVerdict):
    """The judge's reply stopped at its token cap (``max_tokens``, finish_reason "length") before
    the verdict ended, e.g. a small model repeating its reason: asked once more, firmly, then an error."""


class JudgeUnavailable(JudgeError):
    """The judge could not be reached or refused the request.

    ``remote_type`` names the error this one restates (a timeout or connection error, retold with
    the judge's URL and timeout): the record's ``error_type`` stays that original's name."""

    def __init__(self, message: str = "", *, remote_type: str | None = None) -> None:
        super().__init__(message)
        self.remote_type = remote_type


class JudgeProcessDied(JudgeUnavailable):
    """The helper judge process exited (or was gone) while calls waited on it; retried."""


class RemoteJudgeError(JudgeError):
    """A judge failure raised in the judge process; keeps the original's type name and status, so
    the retry policy and the record's `error_type` read it like the original."""

    def __init__(self, remote_type: str, message: str, status_code: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.remote_type = remote_type
        self.status_code = status_code
        self.headers = {"retry-after": str(retry_after)} if retry_after is not None else {}


class EvaluatorError(JudgehooksError):
    """An evaluator could not reach a verdict for this run."""


class BadOutcome(EvaluatorError):
    """An evaluator returned something that is not a verdict (wrong type, NaN, missing threshold)."""


class MissingContext(EvaluatorError):
    """The evaluator grades against context the run did not carry: no ``context_key`` in its metadata,
    or no session_state key its criteria or guidelines name as ``{session_state[key]}``."""


class MissingExpected(EvaluatorError):
    """A check that compares with an expected value was given none for this run."""


class MissingMetrics(EvaluatorError):
    """The run's metrics lack a figure a budget needs (e.g. the provider reported no cost)."""


class MemberError(EvaluatorError):
    """A member of a composite evaluator could not reach a verdict, so neither could the composite."""


class EvaluatorUnavailable(EvaluatorError):
    """A job names an evaluator this worker can neither rebuild nor find among imported ones."""


class RedactionError(JudgehooksError):
    """The `redact=` function raised on a run's text: the text was withheld from the judge, the
    outbox, Redis and the store, and the run's record is an error saying so."""


class StoreError(JudgehooksError):
    """A store could not write or read records (after retries). `records` holds what was not written."""

    records: list[Any] = []
    #: only on the StoreError an offline run()/arun() raises: its AgentAsJudgeResult, every case graded
    result: Any


class NotRebuildable(JudgehooksError, ValueError):
    """A job's spec cannot rebuild its evaluator here: the process needs the module that constructs it."""


class LocalModelUnavailable(JudgehooksError):
    """The local model cannot be served: a piece is not installed, or the server did not start."""
