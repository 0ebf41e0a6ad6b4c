"""The web app tests' fixtures and records: a store seeded with records an overview can chart (two
evaluators, one of which changed version, over two days), a hostile record, and a browser. A module
of its own, not a conftest.py: the suite's tests import the top-level conftest by name, which a
second conftest.py would shadow; the test modules import the fixtures they use."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from judgehooks import EvalRecord, SQLiteStore
from judgehooks._runtime import runtime

HOSTILE = ("<img src=x onerror=\"window.__pwned=1;alert(1)\"><script>window.__pwned=2;alert(2)</script>"
           "</pre><svg onload=alert(3)>")
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def seeded_records(now: datetime = NOW, *, hostile: bool = True) -> list[EvalRecord]:
    """48 hourly runs of agent `support`, each graded by `helpful` (version v1, then v2 for the last
    16 hours: its pass rate rises) and by `polite` (numeric, some borderline); a session record over
    three turns; and one failed record whose every text field is markup and script. The helpful
    records belong to users u0-u2 with a plan and a tier in their metadata, and one of them,
    helpful-13, is the only record that says "Zanzibar" (in its reason). `hostile=False` leaves the
    hostile record out (it names agent `support` too, so the overview would show its markup as the
    agent's name)."""
    records = []
    for hour in range(48):
        at = now - timedelta(hours=48 - hour)
        run = f"run-{hour:02d}"
        version = "v1" if hour < 32 else "v2"
        passed = hour % 4 != 0 if version == "v2" else hour % 2 == 0
        records.append(EvalRecord(
            id=f"helpful-{hour:02d}", created_at=at, status="passed" if passed else "failed",
            evaluator="helpful", evaluator_version=version, mode="binary", passed=passed,
            reason=f"reason {hour}" + (", shipped to Zanzibar" if hour == 13 else ""), agent_id="support",
            agent_name="Support", run_id=run, session_id=f"sess-{hour // 3}", input=f"question {hour}",
            output=f"answer {hour}", latency_ms=100.0 + (hour * 7) % 48, cost_usd=0.001 * (1 + hour % 5),
            trace_id=f"{hour:032x}", user_id=f"u{hour % 3}", **run_figures(hour),
            metadata={"plan": "pro" if hour % 2 else "free", "tier": hour % 3, "beta": hour % 4 == 0}))
        score = 5 + hour % 5  # 5..9 against threshold 7: 6, 7 and 8 are borderline
        records.append(EvalRecord(
            id=f"polite-{hour:02d}", created_at=at + timedelta(seconds=1),
            status="error" if hour == 5 else "passed" if score >= 7 else "failed",
            evaluator="polite", evaluator_version="p1", mode="numeric", threshold=7,
            score=None if hour == 5 else score, passed=None if hour == 5 else score >= 7,
            error_type="JudgeError" if hour == 5 else None, agent_id="support", agent_name="Support",
            run_id=run, session_id=f"sess-{hour // 3}", input=f"question {hour}", output=f"answer {hour}",
            **run_figures(hour)))
    records.append(EvalRecord(
        id="session-1", created_at=now - timedelta(minutes=30), status="passed", evaluator="coherent",
        evaluator_version="s1", mode="binary", passed=True, scope="session", session_id="sess-1",
        run_ids=["run-03", "run-04", "run-05"], reason="the turns hang together", agent_id="support"))
    if hostile:
        records.append(hostile_record(now - timedelta(minutes=10)))
    return records


def run_figures(hour: int) -> dict[str, float | int | None]:
    """The agent run's own figures, the same on each of its records (none on every seventh run)."""
    if hour % 7 == 6:
        return {}
    return {"run_latency_ms": 800.0 + 37 * (hour % 9), "run_input_tokens": 120 + hour, "run_output_tokens": 40 + hour,
            "run_cost_usd": 0.0005 * (1 + hour % 4)}


#: a customer's three turns with agent `support`, each question and answer
TURNS = [
    ("I was charged twice for order 1042.",
     "Sorry about that: I can see two charges of $38.00 on order 1042. I have refunded the second one; it shows "
     "on your card in 3-5 days."),
    ("Will the refund go to my gift card or my Visa?",
     "To the Visa ending 4411, the card the second charge was made on."),
    ("Thanks. Can you also change the delivery address to 12 Mill Lane, Leeds?",
     "Done: order 1042 has not shipped yet, so it now goes to 12 Mill Lane, Leeds. A confirmation e-mail is on "
     "its way."),
]


def conversation_records(now: datetime = NOW) -> list[EvalRecord]:
    """Session `sess-refund`: the three TURNS, each graded by `helpful` v2, and a session verdict of
    `coherent` over all three (shown beside the last)."""
    records = [EvalRecord(
        id=f"refund-{i}", created_at=now - timedelta(minutes=20 - 2 * i), status="passed", evaluator="helpful",
        evaluator_version="v2", mode="binary", passed=True, reason=reason, agent_id="support", agent_name="Support",
        run_id=f"run-refund-{i}", session_id="sess-refund", user_id="u1", input=question, output=answer)
        for i, ((question, answer), reason) in enumerate(zip(TURNS, (
            "Finds the double charge and refunds it, with when the money arrives.",
            "Names the card the refund goes to.",
            "Changes the address and says why it still can."), strict=True))]
    records.append(EvalRecord(
        id="refund-session", created_at=now - timedelta(minutes=10), status="passed", evaluator="coherent",
        evaluator_version="s1", mode="binary", passed=True, scope="session", session_id="sess-refund",
        run_ids=[r.run_id for r in records], agent_id="support", agent_name="Support", user_id="u1",
        input=TURNS[0][0], output=TURNS[-1][1],
        reason="Keeps track of order 1042 across the three turns and settles each request: the refund, its card, "
               "the new address."))
    return records


def routed_record(at: datetime = NOW) -> EvalRecord:
    """A live verdict routed to review because its jurors split, on a run of agent `support`."""
    return EvalRecord(
        id="routed-1", created_at=at - timedelta(minutes=5), status="passed", evaluator="helpful",
        evaluator_version="v2", mode="binary", passed=True, agent_id="support", agent_name="Support",
        run_id="run-48", session_id="sess-16", user_id="u0", input="Can I still return the boots I bought 5 weeks ago?",
        output="Yes: send them back with the order number and we refund you within 5 days.",
        reason="Explains how to return them, but the 30-day return window has passed and the answer does not say so.",
        details={"votes": {"passed": 2, "failed": 1}}, review_reason="jurors disagree: 2 passed, 1 failed")


def hostile_record(at: datetime = NOW) -> EvalRecord:
    return EvalRecord(
        id="hostile-1", created_at=at, status="failed", evaluator="helpful", evaluator_version="v2",
        mode="binary", passed=False, reason=HOSTILE, agent_id="support", agent_name=HOSTILE, run_id="run-x",
        input=HOSTILE, output=HOSTILE, criteria=HOSTILE, metadata={"tool_calls": [{"name": HOSTILE, "args": HOSTILE}]},
        trace_id="javascript:alert(1)", session_id=HOSTILE)


@pytest.fixture
def seeded(tmp_path) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "evals.db")
    runtime.call(store.write, seeded_records())
    yield store
    store.close()


@pytest.fixture
def plain(tmp_path) -> SQLiteStore:
    """The seeded records without the hostile one: the store as real use leaves it, for the pages'
    screenshots."""
    store = SQLiteStore(tmp_path / "evals.db")
    runtime.call(store.write, seeded_records(hostile=False))
    yield store
    store.close()


#: Debian's chromium, driven by Playwright (Playwright's own browser downloads are not reachable in CI)
CHROMIUM = os.environ.get("JUDGEHOOKS_TEST_CHROMIUM", "/usr/bin/chromium")
#: set to 1 to have the browser tests write the docs' screenshots (docs/images/ui-*.png)
SHOTS = os.environ.get("JUDGEHOOKS_UI_SCREENSHOTS") == "1"
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


@pytest.fixture(scope="module")
def browser():
    """Chromium under Playwright; the test is skipped, saying why, when either is missing."""
    if not os.path.exists(CHROMIUM):
        why = f"no chromium at {CHROMIUM}: apt-get install chromium (or set JUDGEHOOKS_TEST_CHROMIUM)"
        if os.environ.get("CI") == "true":  # .ci/run installs it: in CI a missing browser is a failure
            pytest.fail(why)
        pytest.skip(why)
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the dev extra)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    """A fresh browser page that records every dialog opened and every page error."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    opened.dialogs, opened.errors = [], []
    opened.on("dialog", lambda dialog: (opened.dialogs.append(dialog.message), dialog.dismiss()))
    opened.on("pageerror", lambda error: opened.errors.append(str(error)))
    yield opened
    context.close()


def screenshot(page, name: str, *, at: str | None = None, full_page: bool = False) -> None:
    """docs/images/ui-<name>.png, when JUDGEHOOKS_UI_SCREENSHOTS=1 (normal runs rewrite no file): the
    viewport, scrolled first so that the element `at` (a selector) is at its top (as far as the page
    scrolls), or the whole page."""
    if SHOTS:
        IMAGES.mkdir(exist_ok=True)
        if at is not None:
            page.locator(at).first.evaluate("e => scrollTo(0, e.getBoundingClientRect().top + scrollY - 16)")
        page.screenshot(path=str(IMAGES / f"ui-{name}.png"), full_page=full_page)
