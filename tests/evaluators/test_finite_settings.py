"""NaN and infinity are refused by name, for every number setting, at construction and when assigned
later. Every comparison with NaN is false, so `timeout=nan`, `max_cost_usd=nan`, `idle_after=nan` or
`Regex(timeout=nan)` passed the range checks and switched their control off (no timeout, no cap, a
session never due, an unbounded pattern)."""

from __future__ import annotations

import argparse
import math
import re

import pytest

from judgehooks import (
    AgentAsJudgeEval,
    Borderline,
    Budget,
    Contains,
    Criterion,
    Ensemble,
    Group,
    HookSettings,
    LiteLLMJudge,
    MemoryStore,
    Regex,
    Rubric,
    SessionJudge,
    SQLiteStore,
    WebhookNotifier,
    WindowedAlert,
    lifespan,
)
from judgehooks._cli.options import finite
from judgehooks.redact import Presidio
from judgehooks.stores import SpillingStore

BAD = [math.nan, math.inf, -math.inf]
JUDGE = {"criteria": "The answer is polite.", "model": "openai/judge", "api_base": "http://127.0.0.1:9",
         "api_key": "k"}


def judge(**kwargs):
    return AgentAsJudgeEval(**{**JUDGE, "store": MemoryStore(), **kwargs})


def numeric_judge(**kwargs):
    return judge(scoring_strategy="numeric", threshold=7, **kwargs)


def session(**kwargs):
    return SessionJudge(**{**JUDGE, "store": MemoryStore(), **kwargs})


#: (the setting's name in the error, how to construct with it set to `value`)
CONSTRUCT = {
    "AgentAsJudgeEval.timeout": ("timeout", lambda v: judge(timeout=v)),
    "AgentAsJudgeEval.retry_backoff": ("retry_backoff", lambda v: judge(retry_backoff=v)),
    "AgentAsJudgeEval.temperature": ("temperature", lambda v: judge(temperature=v)),
    "AgentAsJudgeEval.threshold": ("threshold", lambda v: judge(scoring_strategy="numeric", threshold=v)),
    "max_cost_usd": ("max_cost_usd", lambda v: judge(max_cost_usd=v)),
    "block_timeout": ("block_timeout", lambda v: judge(block_timeout=v)),
    "requests_per_minute": ("requests_per_minute", lambda v: judge(requests_per_minute=v)),
    "sample_rate": ("sample_rate", lambda v: judge(sample_rate=v)),
    "SessionJudge.idle_after": ("idle_after", lambda v: session(idle_after=v)),
    "SessionJudge.timeout": ("timeout", lambda v: session(timeout=v)),
    "Regex.timeout": ("timeout", lambda v: Regex(r"\d+", timeout=v)),
    "Contains.threshold": ("threshold", lambda v: Contains("x", threshold=v)),
    "Budget.max_latency_ms": ("max_latency_ms", lambda v: Budget(max_latency_ms=v)),
    "Budget.max_cost_usd": ("max_cost_usd", lambda v: Budget(max_cost_usd=v)),
    "Criterion.weight": ("weight of criterion 'polite'", lambda v: Criterion("polite", "It is polite.", weight=v)),
    "Rubric.timeout": ("timeout", lambda v: Rubric([Criterion("polite", "It is polite.")], model="openai/judge",
                                                   api_key="k", timeout=v)),
    "Group.weight": ("weight of 'a'", lambda v: Group([(Contains("a", name="a"), v)])),
    "Group.threshold": ("threshold", lambda v: Group([Contains("a")], pass_rule="score", threshold=v)),
    "Ensemble.threshold": ("threshold", lambda v: Ensemble([numeric_judge(), numeric_judge(name="b")],
                                                           aggregate="mean", threshold=v)),
    "Borderline.margin": ("margin", lambda v: Borderline(numeric_judge(), margin=v)),
    "LiteLLMJudge.timeout": ("timeout", lambda v: LiteLLMJudge("openai/judge", timeout=v)),
    "LiteLLMJudge.temperature": ("temperature", lambda v: LiteLLMJudge("openai/judge", temperature=v)),
    "SQLiteStore.timeout": ("SQLiteStore timeout", lambda v: SQLiteStore(":memory:", timeout=v)),
    "SpillingStore.retry_interval": ("SpillingStore retry_interval",
                                     lambda v: SpillingStore(MemoryStore(), ":memory:", retry_interval=v)),
    "SpillingStore.max_interval": ("SpillingStore max_interval",
                                   lambda v: SpillingStore(MemoryStore(), ":memory:", max_interval=v)),
    "WindowedAlert.threshold": ("threshold", lambda v: WindowedAlert(print, threshold=v)),
    "WindowedAlert.minutes": ("minutes", lambda v: WindowedAlert(print, minutes=v)),
    "WindowedAlert.cooldown": ("cooldown", lambda v: WindowedAlert(print, cooldown=v)),
    "WebhookNotifier.timeout": ("timeout", lambda v: WebhookNotifier("https://example.invalid/hook", timeout=v)),
    "WebhookNotifier.backoff": ("backoff", lambda v: WebhookNotifier("https://example.invalid/hook", backoff=v)),
    "Presidio.score_threshold": ("score_threshold", lambda v: Presidio(score_threshold=v, analyzer=object())),
}


@pytest.mark.parametrize("value", BAD, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("setting", list(CONSTRUCT))
def test_a_non_finite_setting_is_refused_at_construction_by_name(setting, value):
    name, build = CONSTRUCT[setting]
    with pytest.raises(ValueError, match=rf"^{re.escape(name)} must be"):
        build(value)


#: (the setting, a valid object that has it, its name as an attribute)
ASSIGN = {
    "AgentAsJudgeEval.timeout": (judge, "timeout"),
    "AgentAsJudgeEval.temperature": (judge, "temperature"),
    "AgentAsJudgeEval.threshold": (numeric_judge, "threshold"),
    "max_cost_usd": (judge, "max_cost_usd"),
    "block_timeout": (judge, "block_timeout"),
    "requests_per_minute": (judge, "requests_per_minute"),
    "SessionJudge.idle_after": (session, "idle_after"),
    "Regex.timeout": (lambda: Regex(r"\d+"), "timeout"),
    "Contains.threshold": (lambda: Contains("x"), "threshold"),
    "Borderline.margin": (lambda: Borderline(numeric_judge()), "margin"),
}


@pytest.mark.parametrize("value", BAD, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("setting", list(ASSIGN))
def test_a_non_finite_setting_is_refused_when_assigned_later_and_the_old_value_stays(setting, value):
    build, attribute = ASSIGN[setting]
    evaluator = build()
    deployment = attribute in HookSettings.names()
    holder = evaluator.hook_settings if deployment else evaluator
    before = getattr(holder, attribute)
    with pytest.raises(ValueError, match=rf"^{attribute} must be"):
        if deployment:
            evaluator.configure(**{attribute: value})
        else:
            setattr(evaluator, attribute, value)
    assert getattr(evaluator.hook_settings if deployment else evaluator, attribute) == before


@pytest.mark.anyio
@pytest.mark.parametrize("value", BAD, ids=["nan", "inf", "-inf"])
async def test_lifespan_refuses_a_non_finite_drain_timeout(value):
    with pytest.raises(ValueError, match="^drain_timeout must be"):
        async with lifespan(drain_timeout=value):
            pass


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "Infinity"])
def test_cli_number_options_refuse_non_finite_values(text):
    """Every `type=float` option of the CLI (--timeout, --requests-per-minute, --reclaim-after, ...)
    reads through `finite`."""
    with pytest.raises(argparse.ArgumentTypeError, match="finite number"):
        finite(text)


def test_finite_settings_are_still_accepted():
    assert judge(timeout=0.5, max_cost_usd=0.01, temperature=0.0).timeout == 0.5
    assert session(idle_after=0.1).idle_after == 0.1
    assert Regex(r"\d+", timeout=0.25).timeout == 0.25
    assert finite("2.5") == 2.5
