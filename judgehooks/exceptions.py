"""Exceptions. Judge failures become `error` records; these names end up in `error_type`."""

from __future__ import annotations


class JudgehooksError(Exception):
    """Base class of judgehooks' own errors."""


class MalformedVerdict(JudgehooksError):
    """The judge answered, but not with a verdict we can read."""


class JudgeUnavailable(JudgehooksError):
    """The judge could not be reached or refused the request (after retries)."""


class MissingContext(JudgehooksError):
    """The evaluator grades faithfulness to a context (``context_key``) but the run carried none."""


class StoreError(JudgehooksError):
    """A store could not write or read records (after retries). `records` holds what was not written."""

    records: list = []


class BadOutcome(JudgehooksError):
    """An evaluator returned something that is not a verdict (wrong type, NaN, missing threshold)."""


class MissingExpected(JudgehooksError):
    """A check that compares with an expected value was given none for this run."""


class MissingMetrics(JudgehooksError):
    """The run's metrics lack a figure a budget needs (e.g. the provider reported no cost)."""


class MemberError(JudgehooksError):
    """A member of a composite evaluator could not reach a verdict, so neither could the composite."""


class NotRebuildable(JudgehooksError, ValueError):
    """A job's spec cannot rebuild its evaluator here: the process needs the module that constructs it."""
