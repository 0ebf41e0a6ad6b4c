"""Credentials never leave in what judgehooks writes (audit 3, M1): a provider's error body that echoes
the request's Authorization header (as some gateways do) reaches neither the stored record, nor a log
line, nor the OpenTelemetry event. Real agno agent, real HTTP to the loopback stub, through the fast
OpenAI-compatible client and through litellm."""

from __future__ import annotations

import json
import logging

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel tests need opentelemetry-sdk (the dev extra)")

from _tracing import exported  # noqa: E402
from structlog.testing import capture_logs  # noqa: E402

from judgehooks import AgentAsJudgeEval, LiteLLMJudge, MemoryStore  # noqa: E402
from judgehooks._grading.tracing import EVENT  # noqa: E402

MASK = "[REDACTED]"
KEY = "local-7f3c9a1e5b2d-secret"  # no vendor prefix: only knowing the key can find it bare


@pytest.mark.parametrize("status", [400, 500])
@pytest.mark.parametrize("fast", [True, False], ids=["fast-client", "litellm"])
def test_a_key_echoed_in_an_error_body_reaches_no_record_log_line_or_trace_event(make_agent, server, caplog,
                                                                                 fast, status):
    store = MemoryStore()
    judge = LiteLLMJudge("openai/judge", api_base=server.base_url, api_key=KEY, fast_path=fast, timeout=10)
    evaluator = AgentAsJudgeEval(criteria="The answer echoes the question.", judge=judge, store=store,
                                 retries=1, retry_backoff=0.01)
    with exported() as spans, capture_logs() as logs, caplog.at_level(logging.DEBUG):
        make_agent(evaluator).run(f"q [[judge_echo_auth={status}]]")
    assert (judge.route is not None) is fast  # the path under test is the one taken
    [record] = store.records
    assert record.status == "error" and MASK in (record.error_message or "")
    assert "Authorization: Bearer" in record.error_message  # the body did quote the header
    events = [dict(e.attributes or {}) for s in spans.get_finished_spans() for e in s.events if e.name == EVENT]
    assert events and events[0]["gen_ai.evaluation.explanation"] == record.error_message
    assert any(entry.get("event") == "evaluation" for entry in logs)
    written = [record.model_dump_json(), json.dumps(events), repr(logs), caplog.text]
    assert [KEY in text for text in written] == [False] * 4


def test_an_exception_logged_with_its_traceback_is_scrubbed(caplog):
    from judgehooks._base.log import log

    with capture_logs() as logs:
        try:
            raise RuntimeError(f"connect to redis://:{KEY}@db:6379 failed, Authorization: Bearer {KEY}")
        except RuntimeError:
            log.exception("probe_failed", url=f"postgresql://bob:{KEY}@db/app")
    [entry] = logs
    assert KEY not in repr(entry) and "RuntimeError" in entry["exception"] and entry["log_level"] == "error"


@pytest.mark.parametrize(("text", "masked"), [
    ("Authorization: Bearer abc.def-123", f"Authorization: Bearer {MASK}"),
    ("Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {MASK}"),
    ("postgresql://bob:hunter2@db:5432/app", f"postgresql://bob:{MASK}@db:5432/app"),
    ("redis://:hunter2@localhost:6379/0", f"redis://:{MASK}@localhost:6379/0"),
    ("GET /v1?api_key=abc123&x=1", f"GET /v1?api_key={MASK}&x=1"),
    ("dsn host=db password=hunter2 user=bob", f"dsn host=db password={MASK} user=bob"),
    ('{"x-api-key": "abc123", "token": "t0k3n"}', f'{{"x-api-key": "{MASK}", "token": "{MASK}"}}'),
    ("key sk-proj-abcdefghijklmnop1234", f"key {MASK}"),
    ("an ordinary message: nothing to hide", "an ordinary message: nothing to hide"),
])
def test_scrub_masks_every_credential_form(text, masked):
    from judgehooks._base.secrets import scrub

    assert scrub(text) == masked
