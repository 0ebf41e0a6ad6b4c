"""judgehooks: grade every live agno Agent and Team run with an LLM judge, in post_hooks.

Importing this package does not import litellm (seconds); the first judge call does.
"""

from __future__ import annotations

from . import _fork  # noqa: F401  (resets loop state in forked children)
from ._alerts import QualityAlert, WindowedAlert
from ._background import adrain, drain, stats
from ._context import EvalContext, ToolCall
from ._core import RetryPolicy
from ._errors import JudgehooksError, JudgeUnavailable, MalformedVerdict, StoreError
from ._eval import AgentAsJudgeEval
from ._judge import AgnoJudge, Judge, JudgeReply, LiteLLMJudge
from ._lifespan import lifespan
from ._notify import LogNotifier, SlackNotifier, WebhookNotifier
from ._prompt import JudgeRequest
from ._record import EvalRecord
from ._result import AgentAsJudgeResult
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
    "EvalContext",
    "EvalRecord",
    "FanoutStore",
    "Judge",
    "JudgeReply",
    "JudgeRequest",
    "JudgeTemplate",
    "JudgeUnavailable",
    "JudgehooksError",
    "JsonlStore",
    "LiteLLMJudge",
    "LogNotifier",
    "MalformedVerdict",
    "MemoryStore",
    "PostgresStore",
    "QualityAlert",
    "RetryPolicy",
    "SQLiteStore",
    "SlackNotifier",
    "Store",
    "StoreError",
    "ToolCall",
    "Verdict",
    "WebhookNotifier",
    "WindowedAlert",
    "__version__",
    "add_judge",
    "adrain",
    "drain",
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
