"""judgehooks: grade every live agno Agent and Team run in post_hooks: LLM judges,
deterministic checks and composites, all sharing one pipeline (records, stores, callbacks, background).

Importing this package does not import litellm (seconds); the first judge call does.
"""

from __future__ import annotations

from . import _fork  # noqa: F401  (resets loop state in forked children)
from ._alerts import QualityAlert, WindowedAlert
from ._background import adrain, drain, stats
from ._checks_json import IsJSON, JSONSchema, MatchesModel
from ._checks_run import Budget, ToolUse
from ._checks_text import Contains, ExactMatch, LabelMatch, NotContains, Regex
from ._composite import Group, Ordered
from ._context import EvalContext, RunUsage, ToolCall
from ._ensemble import Borderline, Ensemble
from ._errors import (
    BadOutcome,
    JudgehooksError,
    JudgeUnavailable,
    MalformedVerdict,
    MemberError,
    MissingExpected,
    MissingMetrics,
    StoreError,
)
from ._eval import AgentAsJudgeEval
from ._evaluator import Evaluator
from ._function import evaluator
from ._judge import AgnoJudge, Judge, JudgeReply, LiteLLMJudge
from ._lifespan import lifespan
from ._llmjudge import RetryPolicy
from ._notify import LogNotifier, SlackNotifier, WebhookNotifier
from ._outcome import Outcome
from ._prompt import JudgeRequest
from ._record import EvalRecord
from ._result import AgentAsJudgeResult
from ._rubric import Criterion, Rubric
from ._scorer import ScorerEval
from ._templates import JudgeTemplate, add_judge, get_judge, list_judges
from ._verdict import Verdict, parse_verdict
from .stores import JsonlStore, MemoryStore, SQLiteStore, Store
from .stores._agno import AgnoDbStore, FanoutStore

__version__ = "0.1.0"

__all__ = (
    "AgentAsJudgeEval",
    "AgentAsJudgeResult",
    "AgnoDbStore",
    "AgnoJudge",
    "BadOutcome",
    "Borderline",
    "Budget",
    "Contains",
    "Criterion",
    "Ensemble",
    "EvalContext",
    "EvalRecord",
    "Evaluator",
    "ExactMatch",
    "FanoutStore",
    "Group",
    "IsJSON",
    "JSONSchema",
    "JsonlStore",
    "Judge",
    "JudgeReply",
    "JudgeRequest",
    "JudgeTemplate",
    "JudgeUnavailable",
    "JudgehooksError",
    "LabelMatch",
    "LiteLLMJudge",
    "LogNotifier",
    "MalformedVerdict",
    "MatchesModel",
    "MemberError",
    "MemoryStore",
    "MissingExpected",
    "MissingMetrics",
    "NotContains",
    "Ordered",
    "Outcome",
    "PostgresStore",
    "QualityAlert",
    "Regex",
    "RetryPolicy",
    "Rubric",
    "RunUsage",
    "SQLiteStore",
    "ScorerEval",
    "SlackNotifier",
    "Store",
    "StoreError",
    "ToolCall",
    "ToolUse",
    "Verdict",
    "WebhookNotifier",
    "WindowedAlert",
    "__version__",
    "add_judge",
    "adrain",
    "drain",
    "evaluator",
    "get_judge",
    "lifespan",
    "list_judges",
    "parse_verdict",
    "stats",
)


def __getattr__(name: str) -> object:
    # PostgresStore needs the optional psycopg extra: imported on first use, not with the package.
    if name == "PostgresStore":
        from .stores._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
