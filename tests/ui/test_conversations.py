"""A session page is the conversation: every turn in order, from the records or from agno's db when
the app is given it (`app(store, agno_db=...)`), redacted as the evaluators redact, with each
session verdict beside the turns it covers. Real agno agents storing their sessions in agno's
SqliteDb, graded by a real SessionJudge over the loopback model server."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

import re
from html import unescape

import pytest
from _servers import serve
from _ui_fixtures import browser, page  # noqa: F401 (fixtures)
from agno.db.sqlite import SqliteDb
from starlette.testclient import TestClient

import judgehooks
from judgehooks import MemoryStore, SessionJudge
from judgehooks.redact import PII
from judgehooks.ui import app

HOSTILE = "<script>window.__pwned=1</script><img src=x onerror=alert(1)>"


@pytest.fixture
def conversation(server, make_agent, tmp_path):
    """Session s-1: three turns stored by agno; a SessionJudge graded the first two (ended after the
    second), and no run-level evaluator kept any turn's text. Turn 3 holds an e-mail address and markup."""
    store = MemoryStore()
    judge = SessionJudge("Helps the user over the whole conversation.", name="coherent", model="openai/judge",
                         api_base=server.base_url, api_key="test-key", store=store, retry_backoff=0.01, timeout=20,
                         outbox=str(tmp_path / "outbox.db"), idle_after=600)
    db = SqliteDb(db_file=str(tmp_path / "agno.db"))
    agent = make_agent(judge, db=db, id="support")
    runs = [agent.run("first question", session_id="s-1").run_id, agent.run("second question", session_id="s-1").run_id]
    judgehooks.end_session("s-1")
    runs.append(agent.run(f"third question from ana@example.com {HOSTILE}", session_id="s-1").run_id)
    judgehooks.drain(30)
    return store, db, runs


def _turns(html: str) -> list[str]:
    return re.findall(r'<section class="turn">(.*?)</section>', html, re.S)


def test_with_agnos_db_every_turn_shows_in_order_with_the_verdict_beside_its_window(conversation):
    store, db, runs = conversation
    html = TestClient(app(store, agno_db=db), base_url="http://127.0.0.1:8765").get("/sessions/s-1").text
    turns = _turns(html)
    assert [re.search(r'<span class="mono">([^<]+)</span>', t).group(1) for t in turns] == runs
    for turn, question in zip(turns, ("first question", "second question", "third question"), strict=True):
        assert question in unescape(turn.split('class="text output"')[0])  # the input, from agno's db
        assert 'class="text output"' in turn  # every answer, from agno's db
    assert "window-verdict" not in turns[0] and "window-verdict" in turns[1] and "window-verdict" not in turns[2]
    assert 'class="covered"' in turns[0] and 'class="covered"' in turns[1] and 'class="covered"' not in turns[2]
    assert "not in the store" not in html
    assert HOSTILE not in html and "&lt;script&gt;" in html  # agno's texts are escaped like the store's


def test_without_agnos_db_the_page_shows_what_the_records_keep(conversation):
    store, _, runs = conversation
    html = TestClient(app(store), base_url="http://127.0.0.1:8765").get("/sessions/s-1").text
    turns = _turns(html)
    assert len(turns) == 2 and "first question" in turns[0] and 'class="text input"' not in turns[1]
    assert "not in the store" in html


def test_agnos_texts_go_through_the_redactor_given(conversation):
    store, db, _ = conversation
    plain = TestClient(app(store, agno_db=db), base_url="http://127.0.0.1:8765").get("/sessions/s-1").text
    masked = TestClient(app(store, agno_db=db, redact=PII), base_url="http://127.0.0.1:8765").get("/sessions/s-1").text
    assert "ana@example.com" in plain and "ana@example.com" not in masked and "third question" in masked


def test_a_session_only_agno_holds_is_shown_and_an_unknown_one_is_not_found(server, make_agent, tmp_path):
    db = SqliteDb(db_file=str(tmp_path / "agno.db"))
    agent = make_agent(db=db)
    agent.run("hello there", session_id="only-agno")
    web = TestClient(app(MemoryStore(), agno_db=db), base_url="http://127.0.0.1:8765")
    shown = web.get("/sessions/only-agno")
    assert shown.status_code == 200 and "hello there" in shown.text and len(_turns(shown.text)) == 1
    missing = web.get("/sessions/nobody")
    assert missing.status_code == 404 and "no such session in agno" in missing.text


def test_an_unreadable_agno_db_still_shows_the_records_and_says_why(conversation, tmp_path):
    store, _, _ = conversation

    class Broken:
        def get_session(self, **_):
            raise OSError("disk gone")

    html = TestClient(app(store, agno_db=Broken()), base_url="http://127.0.0.1:8765").get("/sessions/s-1").text
    assert "agno&#39;s db could not be read: OSError: disk gone" in html and len(_turns(html)) == 2


def test_app_refuses_what_is_not_an_agno_db_or_a_redactor():
    with pytest.raises(TypeError, match="agno_db"):
        app(MemoryStore(), agno_db="sqlite:///agno.db")
    with pytest.raises(TypeError, match="redact"):
        app(MemoryStore(), redact="PII")


@pytest.mark.slow
def test_a_session_page_shows_its_turns_in_chromium(conversation, page):
    store, db, runs = conversation
    with serve(app(store, agno_db=db)) as base:
        page.goto(base + "/sessions/s-1")
        turns = page.locator("section.turn")
        assert turns.count() == 3
        assert "third question" in turns.nth(2).locator("pre.input").inner_text()
        assert turns.nth(1).locator("aside.window-verdict").count() == 1
        assert page.evaluate("window.__pwned") is None and page.dialogs == [] and page.errors == []
