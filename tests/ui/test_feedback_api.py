"""``POST /api/feedback`` over real HTTP (Starlette's TestClient, and uvicorn under chromium): an
app's front end posts end users' thumbs; the endpoint takes the token or this origin, never a page
of another site; bounds the body and the rate; names the bad field; and the record page shows the
feedback as text."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

import json
from html import unescape

import pytest
from _servers import serve
from _ui_fixtures import HOSTILE, browser, page, seeded  # noqa: F401 (fixtures)
from starlette.testclient import TestClient

from judgehooks import MemoryStore
from judgehooks._runtime import runtime
from judgehooks.ui import app

BASE = "http://127.0.0.1:8765"
SAME_ORIGIN = {"origin": BASE}
TOKEN = "a-token-of-at-least-16-characters"


def client(store, **options) -> TestClient:
    return TestClient(app(store, **options), base_url=BASE, follow_redirects=False)


def kept(store, run_id=None):
    return runtime.call(store.read_feedback, None if run_id is None else [run_id])


def test_a_page_of_this_origin_posts_a_thumb_and_the_record_page_shows_it_beside_the_verdicts(seeded):
    web = client(seeded)
    reply = web.post("/api/feedback", json={"run_id": "run-01", "value": "down", "comment": "wrong city",
                                            "user_id": "u-42"}, headers=SAME_ORIGIN)
    assert reply.status_code == 201, reply.text
    assert reply.json()["source"] == "user" and reply.json()["value"] == "down"
    assert [(f.run_id, f.value, f.user_id, f.source) for f in kept(seeded)] == [("run-01", "down", "u-42", "user")]
    shown = web.get("/records/helpful-01").text
    section = shown.split("<h2>User feedback</h2>", 1)[1]
    assert "u-42" in section and "down" in section and "wrong city" in section
    assert "No feedback." in web.get("/records/helpful-02").text
    assert runtime.call(seeded.read_labels) == []  # not a reviewer's label


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:9999", "https://127.0.0.1:8765"])
def test_a_post_from_another_origin_is_refused_without_the_token(seeded, origin):
    reply = client(seeded).post("/api/feedback", json={"run_id": "run-01", "value": "up"}, headers={"origin": origin})
    assert reply.status_code == 403
    assert "another origin" in reply.json()["error"]
    assert kept(seeded) == []


def test_a_post_with_neither_an_origin_nor_the_token_is_refused(seeded):
    for options in ({}, {"token": TOKEN}):
        reply = client(seeded, **options).post("/api/feedback", json={"run_id": "run-01", "value": "up"})
        assert reply.status_code == 403, options
        assert "token" in reply.json()["error"]
    assert kept(seeded) == []


def test_a_backend_with_the_token_posts_and_a_wrong_token_is_refused(seeded):
    web = client(seeded, token=TOKEN)
    wrong = web.post("/api/feedback", json={"run_id": "run-01", "value": "up"},
                     headers={"authorization": "Bearer not-the-token-at-all"})
    assert wrong.status_code == 403
    right = web.post("/api/feedback", json={"run_id": "run-01", "value": 0.25, "user_id": "u-1"},
                     headers={"authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 201, right.text
    assert [f.value for f in kept(seeded)] == [0.25]
    # the app's own pages still need the token: only the feedback endpoint is open to its origin
    assert web.get("/records", headers=SAME_ORIGIN).status_code == 401


def test_a_form_post_or_text_body_is_refused_so_a_page_of_another_site_cannot_send_it_as_a_simple_request(seeded):
    web = client(seeded)
    form = web.post("/api/feedback", data={"run_id": "run-01", "value": "up"}, headers=SAME_ORIGIN)
    text = web.post("/api/feedback", content=json.dumps({"run_id": "run-01", "value": "up"}),
                    headers={**SAME_ORIGIN, "content-type": "text/plain"})
    assert form.status_code == text.status_code == 415
    assert "application/json" in form.json()["error"]
    assert kept(seeded) == []


@pytest.mark.parametrize("chunked", [False, True])
def test_an_oversized_body_is_refused_with_413(seeded, chunked):
    body = json.dumps({"run_id": "run-01", "value": "up", "comment": "x" * 40_000}).encode()
    content = (body[i:i + 4096] for i in range(0, len(body), 4096)) if chunked else body
    reply = client(seeded).post("/api/feedback", content=content,
                                headers={**SAME_ORIGIN, "content-type": "application/json"})
    assert reply.status_code == 413
    assert "larger than" in reply.json()["error"]
    assert kept(seeded) == []


def test_the_longest_comment_fits_the_body_limit_however_it_is_escaped(seeded):
    comment = "\U0001f600" * 2000  # each written as a surrogate pair of escapes: 12 bytes
    body = json.dumps({"run_id": "r" * 200, "value": "up", "comment": comment, "user_id": "\U0001f600" * 200})
    reply = client(seeded).post("/api/feedback", content=body,
                                headers={**SAME_ORIGIN, "content-type": "application/json"})
    assert reply.status_code == 201, reply.text
    assert [f.comment for f in kept(seeded)] == [comment]


def test_too_much_feedback_from_one_user_is_429_with_retry_after_and_other_users_go_on(seeded):
    web = client(seeded, feedback_rate=(2, 3600))

    def post(**fields):
        return web.post("/api/feedback", json={"run_id": "run-01", "value": "up", **fields}, headers=SAME_ORIGIN)

    assert [post(user_id="u-1").status_code for _ in range(2)] == [201, 201]
    limited = post(user_id="u-1")
    assert limited.status_code == 429
    assert 1 <= int(limited.headers["retry-after"]) <= 1800
    assert "at most 2 every 3600 seconds" in limited.json()["error"]
    assert post(user_id="u-2").status_code == 201
    # without a user id, the client's address is the key
    assert [post().status_code for _ in range(3)] == [201, 201, 429]
    assert len(kept(seeded)) == 4  # u-1 once (replaced), u-2, and the address's two


@pytest.mark.parametrize(("body", "field", "says"), [
    ({"run_id": "run-01", "value": "sideways"}, "value", "'up', 'down' or a finite number"),
    ('{"run_id": "run-01", "value": NaN}', "value", "finite"),
    ('{"run_id": "run-01", "value": 1e999}', "value", "finite"),
    ({"run_id": "run-01", "value": True}, "value", "a bool"),
    ({"run_id": "run-01"}, "value", "value is required"),
    ({"value": "up"}, "run_id", "run_id is required"),
    ({"run_id": 7, "value": "up"}, "run_id", "run_id must be a non-empty string"),
    ({"run_id": "run-01", "value": "up", "comment": "c" * 2001}, "comment", "longer than 2000"),
    ({"run_id": "run-01", "value": "up", "user_id": ["u"]}, "user_id", "user_id must be"),
    ({"run_id": "run-01", "value": "up", "score": 3}, "score", "unknown field 'score'"),
    ('{"run_id": "run-01", "value": "up", "comment": "\\ud800"}', "comment", "lone surrogate"),
])
def test_a_bad_field_is_400_naming_it(seeded, body, field, says):
    content = body if isinstance(body, str) else json.dumps(body)
    reply = client(seeded).post("/api/feedback", content=content,
                                headers={**SAME_ORIGIN, "content-type": "application/json"})
    assert reply.status_code == 400
    assert reply.json()["field"] == field
    assert says in reply.json()["error"]
    assert kept(seeded) == []


@pytest.mark.parametrize("content", ["not json", "[1, 2]", '"up"', b"\xff\xfe", "[" * 20_000, "1" * 5000])
def test_a_body_that_is_not_a_json_object_is_400(seeded, content):
    reply = client(seeded).post("/api/feedback", content=content,
                                headers={**SAME_ORIGIN, "content-type": "application/json"})
    assert reply.status_code == 400
    assert reply.json()["error"].startswith("the body")


def test_a_read_only_app_keeps_no_feedback(seeded):
    reply = client(seeded, read_only=True).post("/api/feedback", json={"run_id": "run-01", "value": "up"},
                                                headers=SAME_ORIGIN)
    assert reply.status_code == 403 and "read-only" in reply.json()["error"]
    assert kept(seeded) == []


def test_a_hostile_comment_is_escaped_on_the_record_page(seeded):
    web = client(seeded)
    assert web.post("/api/feedback", json={"run_id": "run-01", "value": "down", "comment": HOSTILE,
                                           "user_id": HOSTILE[:200]}, headers=SAME_ORIGIN).status_code == 201
    html = web.get("/records/helpful-01").text
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    assert unescape(html).count(HOSTILE) >= 1


@pytest.mark.parametrize("rate", [(0, 60), (5, 0), (5, float("inf")), (True, 60), [5, 60], (5,), "5/60"])
def test_a_bad_feedback_rate_is_refused_at_construction(rate):
    with pytest.raises(ValueError, match="feedback_rate"):
        app(MemoryStore(), feedback_rate=rate)


@pytest.mark.slow
def test_in_chromium_a_same_origin_fetch_keeps_a_hostile_comment_shown_as_text_and_another_origin_keeps_nothing(
        seeded, page):
    with serve(app(seeded)) as base:
        page.goto(base + "/records/helpful-01")
        post = """async ([url, comment]) => (await fetch(url, {method: "POST", headers: {"content-type":
            "application/json"}, body: JSON.stringify({run_id: "run-01", value: "down", comment})})).status"""
        assert page.evaluate(post, [base + "/api/feedback", HOSTILE]) == 201
        # the same server under another name is another origin: its pages' posts are refused
        other = base.replace("127.0.0.1", "localhost")
        page.goto(other + "/records/helpful-02")
        refused = page.evaluate("""async (url) => { try { return (await fetch(url, {method: "POST", mode:
            "no-cors", body: JSON.stringify({run_id: "run-01", value: "up"})})).type } catch (e) {
            return "failed" } }""", base + "/api/feedback")
        assert refused in ("opaque", "failed")
        page.goto(base + "/records/helpful-01")
        page.wait_for_load_state("load")
        assert page.locator("table.feedback td.comment").inner_text() == HOSTILE
        assert page.evaluate("window.__pwned") is None
        assert page.dialogs == [] and page.errors == []
        assert page.locator("main img").count() == 0
    assert [(f.value, f.comment) for f in kept(seeded)] == [("down", HOSTILE)]


def test_an_agentos_front_end_posts_a_thumb_on_the_run_agentos_answered_and_the_record_page_shows_it(
        make_judge, make_agent, tmp_path):
    import httpx
    from agno.os import AgentOS

    import judgehooks
    from judgehooks import SQLiteStore

    store = SQLiteStore(tmp_path / "evals.db")
    agent = make_agent(make_judge(store=store, scoring_strategy="numeric", name="echoes"), id="os-agent")
    fastapi_app = AgentOS(agents=[agent], telemetry=False).get_app()
    fastapi_app.mount("/evals", app(store))
    with serve(fastapi_app) as base, httpx.Client(base_url=base, timeout=30) as web:
        run = web.post("/agents/os-agent/runs", data={"message": "good [[score=9]]", "stream": "false"})
        assert run.status_code == 200, run.text
        run_id = run.json()["run_id"]
        thumb = web.post("/evals/api/feedback", json={"run_id": run_id, "value": "down", "comment": "too terse"},
                         headers={"origin": base})
        assert thumb.status_code == 201, thumb.text
        assert judgehooks.drain(60)
        (record,) = runtime.call(store.query)
        assert record.run_id == run_id
        shown = web.get(f"/evals/records/{record.id}").text.split("<h2>User feedback</h2>", 1)[1]
        assert "too terse" in shown and "down" in shown
    store.close()


def test_the_records_list_says_what_users_said_about_each_run(seeded):
    web = client(seeded)
    for fields in ({"value": "up", "user_id": "a"}, {"value": "up", "user_id": "b"}, {"value": "down"},
                   {"value": 4}, {"value": 3, "user_id": "c"}):
        assert web.post("/api/feedback", json={"run_id": "run-01", **fields}, headers=SAME_ORIGIN).status_code == 201
    html = web.get("/records?evaluator=helpful").text
    rows = {row.split('href="/records/', 1)[1].split('"', 1)[0]: row for row in html.split("<tr>")[2:]
            if 'href="/records/' in row}
    assert '<td class="feedback">\N{THUMBS UP SIGN} 2 · \N{THUMBS DOWN SIGN} 1 · 3.5 (2)</td>' in rows["helpful-01"]
    assert '<td class="feedback"></td>' in rows["helpful-02"]
    assert "<th>users said</th>" in html
