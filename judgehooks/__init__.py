"""judgehooks: grade every live agno Agent and Team run in post_hooks: LLM judges,
deterministic checks and composites, all sharing one pipeline (records, stores, callbacks, background).

Importing this package imports none of its parts: each public name loads its module on first use
(PEP 562), so `import judgehooks` costs almost nothing and `from judgehooks import AgentAsJudgeEval`
loads what that evaluator needs, not the stores, alerts and CLI it does not. litellm is imported by
the first judge call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._base.lazy import attach

if TYPE_CHECKING:
    from ._alerts.calibration import Calibration, acalibrate, calibrate
    from ._alerts.consistency import Consistency, aconsistency, consistency
    from ._alerts.notifiers import LogNotifier, SlackNotifier, WebhookNotifier
    from ._alerts.windowed import QualityAlert, WindowedAlert
    from ._base.context import EvalContext, RunUsage, ToolCall
    from ._base.feedback import Feedback
    from ._base.label import Label
    from ._base.outcome import Outcome
    from ._base.record import EvalRecord
    from ._base.result import AgentAsJudgeEvaluation, AgentAsJudgeResult
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
    from ._hooks.stream import astream, stream
    from ._judges.agno import AgnoJudge, BinaryJudgeResponse, NumericJudgeResponse
    from ._judges.base import BaseJudge, Judge, JudgeReply
    from ._judges.call import RetryPolicy
    from ._judges.litellm import LiteLLMJudge
    from ._judges.prompt import JudgeRequest
    from ._judges.verdict import Verdict, parse_verdict
    from ._optimize.align import AlignResult, aalign_judge, align_judge
    from ._optimize.optimize import OptimizeResult, aoptimize, optimize
    from ._optimize.shadow import Shadow
    from ._optimize.shadowreport import ShadowReport, ashadow_report, shadow_report
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
        VerdictCut,
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
    from .stores._human import afeedback, alabel, feedback, label

__version__ = "0.1.0"

#: Where each public name lives: the module, relative to this package, that defines it.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "._alerts.calibration": ("Calibration", "acalibrate", "calibrate"),
    "._alerts.consistency": ("Consistency", "aconsistency", "consistency"),
    "._alerts.notifiers": ("LogNotifier", "SlackNotifier", "WebhookNotifier"),
    "._alerts.windowed": ("QualityAlert", "WindowedAlert"),
    "._base.context": ("EvalContext", "RunUsage", "ToolCall"),
    "._base.feedback": ("Feedback",),
    "._base.label": ("Label",),
    "._base.outcome": ("Outcome",),
    "._base.record": ("EvalRecord",),
    "._base.result": ("AgentAsJudgeEvaluation", "AgentAsJudgeResult"),
    "._evaluators.base": ("Evaluator",),
    "._evaluators.checks": (
        "Budget", "Contains", "ExactMatch", "IsJSON", "JSONSchema", "LabelMatch", "MatchesModel", "NotContains",
        "Regex", "ToolUse",
    ),
    "._evaluators.combine": ("Borderline", "Ensemble", "Group", "Ordered"),
    "._evaluators.function": ("evaluator",),
    "._evaluators.llm": ("AgentAsJudgeEval",),
    "._evaluators.rubric": ("Criterion", "Rubric"),
    "._evaluators.scorer": ("ScorerEval",),
    "._evaluators.session": ("SessionJudge",),
    "._evaluators.templates": ("JudgeTemplate", "add_judge", "get_judge", "list_judges"),
    "._grading.sessions": ("aend_session", "end_session"),
    "._hooks.settings": ("HookSettings",),
    "._hooks.stream": ("astream", "stream"),
    "._judges.agno": ("AgnoJudge", "BinaryJudgeResponse", "NumericJudgeResponse"),
    "._judges.base": ("BaseJudge", "Judge", "JudgeReply"),
    "._judges.call": ("RetryPolicy",),
    "._judges.litellm": ("LiteLLMJudge",),
    "._judges.prompt": ("JudgeRequest",),
    "._judges.verdict": ("Verdict", "parse_verdict"),
    "._optimize.align": ("AlignResult", "aalign_judge", "align_judge"),
    "._optimize.optimize": ("OptimizeResult", "aoptimize", "optimize"),
    "._optimize.shadow": ("Shadow",),
    "._optimize.shadowreport": ("ShadowReport", "ashadow_report", "shadow_report"),
    "._runtime": ("adrain", "drain", "lifespan", "stats"),
    ".exceptions": (
        "BadOutcome", "EvaluatorError", "EvaluatorUnavailable", "JudgeError", "JudgehooksError", "JudgeProcessDied",
        "JudgeUnavailable", "LocalModelUnavailable", "MalformedVerdict", "MemberError", "MissingContext",
        "MissingExpected", "MissingMetrics", "NotRebuildable", "RedactionError", "RemoteJudgeError", "StoreError",
        "VerdictCut",
    ),
    ".stores": (
        "AgnoDbStore", "BaseStore", "FanoutStore", "JsonlStore", "MemoryStore", "PostgresStore", "RecordFilter",
        "SQLiteStore", "Store",
    ),
    ".stores._human": ("afeedback", "alabel", "feedback", "label"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = (
    "AgentAsJudgeEval",
    "AgentAsJudgeEvaluation",
    "AgentAsJudgeResult",
    "AgnoDbStore",
    "AgnoJudge",
    "AlignResult",
    "BadOutcome",
    "BaseJudge",
    "BaseStore",
    "BinaryJudgeResponse",
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
    "Feedback",
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
    "NumericJudgeResponse",
    "OptimizeResult",
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
    "Shadow",
    "ShadowReport",
    "SlackNotifier",
    "Store",
    "StoreError",
    "ToolCall",
    "ToolUse",
    "Verdict",
    "VerdictCut",
    "WebhookNotifier",
    "WindowedAlert",
    "__version__",
    "aalign_judge",
    "acalibrate",
    "aconsistency",
    "add_judge",
    "adrain",
    "aend_session",
    "afeedback",
    "alabel",
    "align_judge",
    "aoptimize",
    "ashadow_report",
    "astream",
    "calibrate",
    "consistency",
    "drain",
    "end_session",
    "evaluator",
    "feedback",
    "get_judge",
    "label",
    "lifespan",
    "list_judges",
    "optimize",
    "parse_verdict",
    "shadow_report",
    "stats",
    "stream",
)

