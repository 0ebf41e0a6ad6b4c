"""Notifiers and windowed alerts: real HTTP receivers on 127.0.0.1, real agents judged over HTTP."""

from __future__ import annotations

import socket
import uuid

import pytest
from structlog.testing import capture_logs

import judgehooks
from judgehooks import LogNotifier, SlackNotifier, WebhookNotifier, WindowedAlert
from judgehooks._base.record import EvalRecord
from judgehooks.testing import WebhookReceiver


@pytest.fixture
def receiver():
    with WebhookReceiver() as r:
        yield r


def dead_url() -> str:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def record(status: str, agent: str = "agent-a", evaluator: str = "helpful") -> EvalRecord:
    return EvalRecord(id=str(uuid.uuid4()), status=status, evaluator=evaluator, mode="binary", agent_id=agent,
                      run_id=str(uuid.uuid4()), reason=f"it {status}")


# ---- notifiers ----------------------------------------------------------------------------------

def test_webhook_on_fail_posts_the_failed_record(make_judge, make_agent, receiver):
    notifier = WebhookNotifier(receiver.url)
    agent = make_agent(make_judge(on_fail=notifier, name="helpful"), id="agent-w")
    out = agent.run("bad answer [[fail]]")
    agent.run("good answer")
    assert judgehooks.drain(10)
    (body,) = receiver.posts
    assert (body["kind"], body["status"], body["evaluator"], body["agent_id"], body["run_id"]) == (
        "evaluation", "failed", "helpful", "agent-w", out.run_id)
    assert body["reason"] == "stub judge says fail"
    assert notifier.stats() == {"sent": 1, "failed": 0, "dropped": 0, "pending": 0}


def test_slack_notifier_posts_an_incoming_webhook_message(make_judge, make_agent, receiver):
    agent = make_agent(make_judge(on_error=SlackNotifier(receiver.url), retries=0, name="helpful"), name="Bot")
    agent.run("q [[judge_status=500]]")
    assert judgehooks.drain(10)
    (body,) = receiver.posts
    assert body["text"].startswith("helpful error on Bot")
    assert body["blocks"][0]["type"] == "section" and "*Status*\nerror" in [
        f["text"] for f in body["blocks"][1]["fields"]]


def test_log_notifier_emits_a_quality_alert_warning(make_judge, make_agent):
    agent = make_agent(make_judge(on_fail=LogNotifier(), name="helpful"))
    with capture_logs() as logs:
        out = agent.run("q [[fail]]")
    (event,) = [e for e in logs if e["event"] == "quality_alert"]
    assert (event["log_level"], event["status"], event["run_id"]) == ("warning", "failed", out.run_id)


def test_a_hanging_receiver_does_not_hold_the_run(make_judge, make_agent, store):
    with WebhookReceiver(hang=True) as stuck:
        notifier = WebhookNotifier(stuck.url, timeout=30, retries=0)
        agent = make_agent(make_judge(on_fail=notifier))
        out = agent.run("q [[fail]]")
        # The run is back with its verdict stored while the POST is still waiting on the receiver.
        assert out.content == "ECHO: q [[fail]]" and [r.status for r in store.records] == ["failed"]
        assert notifier.stats()["pending"] == 1
    assert judgehooks.drain(15)  # receiver gone: the delivery fails, is logged and counted
    assert notifier.stats() == {"sent": 0, "failed": 1, "dropped": 0, "pending": 0}


def test_a_dead_receiver_is_retried_with_backoff_then_logged(make_judge, make_agent, store):
    notifier = WebhookNotifier(dead_url(), retries=2, backoff=0.01)
    agent = make_agent(make_judge(on_fail=notifier))
    with capture_logs() as logs:
        agent.run("q [[fail]]")
        assert judgehooks.drain(15)
    (failed,) = [e for e in logs if e["event"] == "notify_failed"]
    assert failed["attempts"] == 3 and "ConnectError" in failed["error"]
    assert [r.status for r in store.records] == ["failed"] and notifier.stats()["failed"] == 1


def test_server_errors_are_retried_and_client_errors_are_not(make_judge, make_agent):
    with WebhookReceiver(status=503) as flaky, WebhookReceiver(status=404) as wrong:
        retried = WebhookNotifier(flaky.url, retries=2, backoff=0.01)
        not_retried = WebhookNotifier(wrong.url, retries=2, backoff=0.01)
        agent = make_agent(make_judge(on_fail=retried, on_error=not_retried, retries=0))
        agent.run("q [[fail]]")
        agent.run("q [[judge_status=500]]")
        assert judgehooks.drain(15)
        assert (flaky.attempts, wrong.attempts) == (3, 1)


def test_a_dead_receiver_cannot_pile_up_work(make_judge, make_agent):
    with WebhookReceiver(hang=True) as stuck:
        notifier = WebhookNotifier(stuck.url, timeout=30, retries=0, max_pending=2)
        agent = make_agent(make_judge(on_fail=notifier))
        with capture_logs() as logs:
            for i in range(4):
                agent.run(f"q{i} [[fail]]")
        assert notifier.stats()["pending"] == 2 and notifier.stats()["dropped"] == 2
        assert len([e for e in logs if e["event"] == "notify_dropped"]) == 2
    assert judgehooks.drain(15)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"url": "ftp://x"}, "url must be an http"),
    ({"url": "http://h", "timeout": 0}, "timeout must be a number > 0"),
    ({"url": "http://h", "retries": -1}, "retries must be an integer >= 0"),
    ({"url": "http://h", "max_pending": 0}, "max_pending must be an integer >= 1"),
])
def test_notifier_settings_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WebhookNotifier(**kwargs)


# ---- windowed alert -----------------------------------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def feed(alert: WindowedAlert, statuses: str, **kwargs) -> list:
    codes = {"p": "passed", "f": "failed", "e": "error", "s": "skipped"}
    return [a for a in (alert.observe(record(codes[c], **kwargs)) for c in statuses) if a is not None]


def test_alert_fires_once_per_incident():
    alert = WindowedAlert(print, threshold=0.8, last_n=10, min_evaluations=10, cooldown=0)
    assert feed(alert, "pppppppppp") == []
    fired = feed(alert, "ffffff")  # rate falls to 0.8, 0.7 (fires), 0.6, ... : still one incident
    assert len(fired) == 1 and fired[0].pass_rate == 0.7 and fired[0].failed == 3 and fired[0].graded == 10
    assert fired[0].agent_id == "agent-a" and fired[0].evaluator == "helpful"


def test_alert_re_arms_when_the_pass_rate_recovers():
    alert = WindowedAlert(print, threshold=0.5, last_n=4, min_evaluations=4, cooldown=0)
    assert len(feed(alert, "ffff")) == 1
    assert feed(alert, "pppp") == []  # recovered: armed again
    assert len(feed(alert, "ffff")) == 1


def test_cooldown_holds_back_a_second_incident():
    clock = Clock()
    alert = WindowedAlert(print, threshold=0.5, last_n=4, min_evaluations=4, cooldown=600, clock=clock)
    assert len(feed(alert, "ffff")) == 1
    feed(alert, "pppp")
    clock.now += 599
    assert feed(alert, "ffff") == []  # recovered and fell again, but within the cooldown
    clock.now += 2
    assert len(feed(alert, "f")) == 1  # cooldown over, still below threshold and armed: fires


def test_judge_errors_are_not_failures_but_are_counted():
    alert = WindowedAlert(print, threshold=0.8, last_n=20, min_evaluations=5, cooldown=0)
    assert feed(alert, "eeeeeeeeeeppppp") == []
    (fired,) = feed(alert, "ff")
    assert (fired.graded, fired.failed, fired.errors) == (7, 2, 10)
    assert feed(alert, "ssss") == []  # skipped records are ignored


def test_minutes_window_forgets_old_evaluations():
    clock = Clock()
    alert = WindowedAlert(print, threshold=0.5, last_n=None, minutes=5, min_evaluations=3, cooldown=0, clock=clock)
    feed(alert, "ff")
    clock.now += 301  # the two failures leave the window
    assert feed(alert, "ppf") == []
    assert len(feed(alert, "ff")) == 1


def test_each_agent_has_its_own_window():
    alert = WindowedAlert(print, threshold=0.5, last_n=2, min_evaluations=2, cooldown=0)
    assert feed(alert, "ff", agent="a") != [] and feed(alert, "ff", agent="b") != []
    assert feed(alert, "ff", agent="a", evaluator="other") != []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"threshold": 0}, "threshold must be a pass rate in"),
    ({"threshold": 1.5}, "threshold must be a pass rate in"),
    ({"last_n": None, "minutes": None}, "give last_n"),
    ({"last_n": 5, "min_evaluations": 6}, "cannot exceed last_n"),
    ({"cooldown": -1}, "cooldown must be"),
    ({"minutes": 0}, "minutes must be"),
])
def test_alert_settings_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WindowedAlert(print, **kwargs)


def test_windowed_alert_on_a_live_agent_posts_one_alert(make_judge, make_agent, receiver):
    alert = WindowedAlert(WebhookNotifier(receiver.url), threshold=0.75, last_n=4, min_evaluations=4)
    agent = make_agent(make_judge(on_record=alert, name="helpful"), id="agent-live")
    for question in ("a", "b", "c [[fail]]", "d [[fail]]", "e [[fail]]", "f [[fail]]"):
        agent.run(question)
    assert judgehooks.drain(10)
    (body,) = receiver.posts
    assert (body["kind"], body["agent_id"], body["pass_rate"], body["graded"]) == (
        "quality_alert", "agent-live", 0.5, 4)


def test_on_record_sees_every_status(make_judge, make_agent):
    seen = []
    agent = make_agent(make_judge(on_record=lambda r: seen.append(r.status), retries=0))
    for question in ("a", "b [[fail]]", "c [[judge_status=500]]"):
        agent.run(question)
    assert seen == ["passed", "failed", "error"]
