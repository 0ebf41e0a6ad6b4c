"""judgehooks: grade every live agno Agent and Team run in post_hooks: LLM judges,
deterministic checks and composites, all sharing one pipeline (records, stores, callbacks, background).

Importing this package does not import litellm (seconds); the first judge call does.
"""

from __future__ import annotations

from ._alerts.calibration import Calibration, acalibrate, calibrate
from ._alerts.consistency import Consistency, aconsistency, consistency
from ._alerts.notifiers import LogNotifier, SlackNotifier, WebhookNotifier
from ._alerts.windowed import QualityAlert, WindowedAlert
from ._base.context import EvalContext, RunUsage, ToolCall
from ._base.label import Label
from ._base.outcome import Outcome
from ._base.record import EvalRecord
from ._base.result import AgentAsJudgeResult
from ._evaluators.base import Evaluator
from ._evaluators.checks import (
    Budget,
    Contains,
    ExactMatch,
    IsJSON,
    JSONSchema,
    LabelMatch,
    MatchesModel,
    NotContains,
    Regex,
    ToolUse,
)
from ._evaluators.combine import Borderline, Ensemble, Group, Ordered
from ._evaluators.function import evaluator
from ._evaluators.llm import AgentAsJudgeEval
from ._evaluators.rubric import Criterion, Rubric
from ._evaluators.scorer import ScorerEval
from ._evaluators.session import SessionJudge
from ._evaluators.templates import JudgeTemplate, add_judge, get_judge, list_judges
from ._grading.sessions import aend_session, end_session
from ._hooks.settings import HookSettings
from ._judges.agno import AgnoJudge
from ._judges.base import BaseJudge, Judge, JudgeReply
from ._judges.call import RetryPolicy
from ._judges.litellm import LiteLLMJudge
from ._judges.prompt import JudgeRequest
from ._judges.verdict import Verdict, parse_verdict
from ._runtime import adrain, drain, lifespan, stats
from .exceptions import (
    BadOutcome,
    EvaluatorError,
    EvaluatorUnavailable,
    JudgeError,
    JudgehooksError,
    JudgeProcessDied,
    JudgeUnavailable,
    LocalModelUnavailable,
    MalformedVerdict,
    MemberError,
    MissingContext,
    MissingExpected,
    MissingMetrics,
    NotRebuildable,
    RedactionError,
    RemoteJudgeError,
    StoreError,
)
from .stores import (
    AgnoDbStore,
    BaseStore,
    FanoutStore,
    JsonlStore,
    MemoryStore,
    PostgresStore,
    RecordFilter,
    SQLiteStore,
    Store,
)
from .stores._human import alabel, label

__version__ = "0.1.0"

__all__ = (
    "AgentAsJudgeEval",
    "AgentAsJudgeResult",
    "AgnoDbStore",
    "AgnoJudge",
    "BadOutcome",
    "BaseJudge",
    "BaseStore",
    "Borderline",
    "Budget",
    "Calibration",
    "Consistency",
    "Contains",
    "Criterion",
    "Ensemble",
    "EvalContext",
    "EvalRecord",
    "Evaluator",
    "EvaluatorError",
    "EvaluatorUnavailable",
    "ExactMatch",
    "FanoutStore",
    "Group",
    "HookSettings",
    "IsJSON",
    "JSONSchema",
    "JsonlStore",
    "Judge",
    "JudgeError",
    "JudgeProcessDied",
    "JudgeReply",
    "JudgeRequest",
    "JudgeTemplate",
    "JudgeUnavailable",
    "JudgehooksError",
    "Label",
    "LabelMatch",
    "LiteLLMJudge",
    "LocalModelUnavailable",
    "LogNotifier",
    "MalformedVerdict",
    "MatchesModel",
    "MemberError",
    "MemoryStore",
    "MissingContext",
    "MissingExpected",
    "MissingMetrics",
    "NotContains",
    "NotRebuildable",
    "Ordered",
    "Outcome",
    "PostgresStore",
    "QualityAlert",
    "RecordFilter",
    "RedactionError",
    "Regex",
    "RemoteJudgeError",
    "RetryPolicy",
    "Rubric",
    "RunUsage",
    "SQLiteStore",
    "ScorerEval",
    "SessionJudge",
    "SlackNotifier",
    "Store",
    "StoreError",
    "ToolCall",
    "ToolUse",
    "Verdict",
    "WebhookNotifier",
    "WindowedAlert",
    "__version__",
    "acalibrate",
    "aconsistency",
    "add_judge",
    "adrain",
    "aend_session",
    "alabel",
    "calibrate",
    "consistency",
    "drain",
    "end_session",
    "evaluator",
    "get_judge",
    "label",
    "lifespan",
    "list_judges",
    "parse_verdict",
    "stats",
)

