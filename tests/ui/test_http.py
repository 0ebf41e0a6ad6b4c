"""Every route of the web app over plain HTTP (Starlette's TestClient): what each page shows, the
filters and paging, and the guards: CSP, escaping, CSRF, the access token, read-only."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser
from urllib.parse import quote

import pytest
from _ui_fixtures import HOSTILE, hostile_record, seeded, seeded_records  # noqa: F401 (a fixture)
from starlette.testclient import TestClient

from judgehooks import MemoryStore, label
from judgehooks._runtime import runtime
from judgehooks.ui import app

PAGES = ["/", "/records", "/segments?by=meta:plan", "/failures",
         "/records/helpful-01", "/review", "/calibration", "/sessions", "/sessions/sess-1",
         "/records?status=failed&evaluator=helpful&version=v2&session=sess-15&since=all&page=1",
         "/?agent=support&evaluator=polite&since=30d&bucket=day", "/compare",
         "/compare?by=version&evaluator=polite&a=p1&b=p2&agent=support&since=all"]
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def client(store, **options) -> TestClient:
    return TestClient(app(store, **options), base_url="http://127.0.0.1:8765", follow_redirects=False)


def csrf_of(html: str) -> tuple[str, str]:
    """The review form's CSRF token and record id."""
    token = re.search(r'name="csrf" value="([^"]+)"', html)
    record = re.search(r'name="record_id" value="([^"]+)"', html)
    assert token and record, html
    return token.group(1), record.group(1)


@pytest.mark.parametrize("path", [*PAGES, "/static/review.js", "/static/ui.css"])
def test_every_page_answers_under_a_strict_content_security_policy(seeded, path):
    reply = client(seeded).get(path)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-security-policy"] == CSP
    assert "unsafe-inline" not in reply.headers["content-security-policy"]
    assert reply.headers["x-content-type-options"] == "nosniff"
    if path.startswith("/static"):
        return
    tags = Tags()
    tags.feed(reply.text)
    assert not [a for _, attrs in tags.found for a, _ in attrs if a.startswith("on") or a == "style"]
    scripts = [dict(attrs) for tag, attrs in tags.found if tag == "script"]
    assert all(s.get("src", "").startswith("/static/") for s in scripts), scripts
    assert not tags.script_text, "inline script"
    addresses = [v for _, attrs in tags.found for a, v in attrs if a in ("href", "src", "action") and v]
    assert all(v.startswith("/") for v in addresses), "something loaded from elsewhere"


class Tags(HTMLParser):
    """Every start tag with its attributes, and any text inside a script element."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, attrs))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_text += data.strip()


@pytest.mark.parametrize("path", ["/records/no-such-id", "/sessions/no-such-session", "/nowhere"])
def test_unknown_records_and_pages_are_404(seeded, path):
    reply = client(seeded).get(path)
    assert reply.status_code == 404 and "<h1>Not found</h1>" in reply.text


@pytest.mark.parametrize("query", ["status=nope", "since=banana", "page=0", "page=x", "agent=" + "a" * 201])
def test_bad_filters_are_400_saying_why(seeded, query):
    reply = client(seeded).get(f"/records?{query}")
    assert reply.status_code == 400 and "Bad request" in reply.text


HOSTILE_QUERIES = [  # (page, parameter, value): each a 500 once
    ("/records", "page", "²"), ("/sessions", "page", "²"), ("/records", "page", "١٢"), ("/records", "page", "9" * 40),
    ("/", "since", "99999999999999d"), ("/records", "since", "99999999999999d"),
    ("/sessions", "since", "1" * 180 + "w"),
    ("/records", "since", "0001-01-01T00:00:00+01:00"), ("/", "since", "9999-12-31T23:59:59-01:00"),
    ("/sessions", "since", "0001-01-01T00:30:00+00:45"), ("/records", "agent", "a\x00b"), ("/", "evaluator", "\x00"),
    ("/calibration", "evaluator", "\x00"), ("/compare", "since", "99999999999999d"), ("/compare", "evaluator", "\x00"),
]


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def any_seeded(request, tmp_path):
    """The seeded records in each kind of store the pages read differently (SQL, or one pass)."""
    from judgehooks import PostgresStore, SQLiteStore

    store = {"sqlite": lambda: SQLiteStore(tmp_path / "evals.db"), "memory": MemoryStore,
             "postgres": lambda: PostgresStore(request.getfixturevalue("postgres_dsn"))}[request.param]()
    runtime.call(store.write, seeded_records())
    yield store
    runtime.call(store.aclose)


@pytest.mark.parametrize(("path", "name", "value"), HOSTILE_QUERIES)
def test_a_hostile_query_value_is_a_400_naming_it_above_the_form_that_corrects_it(any_seeded, path, name, value):
    reply = client(any_seeded).get(path, params={name: value})
    assert reply.status_code == 400, reply.text[-400:]
    said = re.search(r'<p class="message bad" role="alert"><strong>Bad request:</strong> (.*?)</p>', reply.text)
    assert said and said.group(1).startswith(name), reply.text[-400:]
    form = re.search(r'<form class="filters" method="get" action="([^"]+)">(.*?)</form>', reply.text, re.S)
    assert form and form.group(1) == path.rstrip("/") + ("/overview" if path == "/" else ""), "no form to correct it"
    if name != "page":  # the value as typed, in its field, to correct there (escaped like every byte)
        field = re.search(rf'<input name="{name}" value="([^"]*)"', form.group(2))
        assert field and unescape(field.group(1)) == value[:1000]


@pytest.mark.parametrize("path", ["/", "/records", "/records/hostile-1", "/review?queue=failed",
                                  "/sessions/" + quote(HOSTILE, safe=""), "/records?agent=" + quote(HOSTILE)])
def test_hostile_bytes_are_text_on_every_page(seeded, path):
    html = client(seeded, trace_url="http://phoenix.test/trace/{trace_id}").get(path).text
    tags = Tags()
    tags.feed(html)
    assert "img" not in [tag for tag, _ in tags.found]
    assert not [a for _, attrs in tags.found for a, _ in attrs if a.startswith("on")]
    assert not tags.script_text
    assert not [v for _, attrs in tags.found for a, v in attrs if a == "href" and "javascript" in (v or "")]
    if path == "/records/hostile-1":
        assert html.count("&lt;img src=x onerror=") >= 5  # input, output, reason, criteria, agent, tool call
        assert "javascript:alert(1)" in html  # the trace id, shown as text: not a plain id, so no link


def test_a_trace_id_links_to_the_configured_trace_url(seeded):
    html = client(seeded, trace_url="http://phoenix.test/trace/{trace_id}").get("/records/helpful-01").text
    assert f'href="http://phoenix.test/trace/{1:032x}"' in html
    assert "phoenix.test" not in client(seeded).get("/records/helpful-01").text


def test_the_overview_has_a_row_per_agent_evaluator_and_version_and_a_chart_per_evaluator(seeded):
    html = client(seeded).get("/").text
    rows = re.findall(r"<tr>\s*<td>(.*?)</td>\s*<td><a [^>]*>(.*?)</a></td>\s*<td class=\"mono\">(.*?)</td>"
                      r"\s*<td class=\"num\">(\d+)</td>\s*<td class=\"num\">(.*?)</td>", html)
    table = {(evaluator, version): (int(n), rate) for _, evaluator, version, n, rate in rows}
    assert table[("helpful", "v1")] == (32, "50.0%")
    assert table[("helpful", "v2")] == (17, f"{100 * 12 / 17:.1f}%")  # 16 hourly runs + the hostile record
    assert table[("polite", "p1")][0] == 48
    charts = re.findall(r"<h2>(.*?): pass rate per (\w+)</h2>", html)
    assert [c[0] for c in charts] == ["coherent", "helpful", "polite"] and charts[0][1] == "hour"
    helpful = html.split("<h2>helpful: pass rate")[1].split("</svg>")[0]
    assert re.findall(r'<text class="version"[^>]*>(\w+)</text>', helpful) == ["v1", "v2"]
    assert helpful.count('<circle class="rate"') == 48  # one point per hour
    polite = html.split("<h2>polite: pass rate")[1].split("</svg>")[0]
    assert 'class="version"' not in polite  # one version: nothing to mark


def test_the_overview_filters_by_agent_evaluator_and_since(seeded):
    c = client(seeded)
    assert "<h2>polite" in c.get("/?evaluator=polite").text and "<h2>helpful" not in c.get("/?evaluator=polite").text
    assert "No records match the filters" in c.get("/?agent=nobody").text
    day = c.get("/?since=2026-11-30T06:00:00Z&evaluator=helpful&bucket=day").text
    helpful = day.split("<h2>helpful: pass rate")[1].split("</section>")[0]
    assert "pass rate per day" in day and helpful.count('<circle class="rate"') == 1


def test_records_filter_and_page_on_the_server(seeded):
    c = client(seeded)
    failed = c.get("/records?status=failed").text
    statuses = re.findall(r'<span class="status (\w+)">', failed)
    assert statuses and set(statuses) == {"failed"}
    first = c.get("/records").text
    assert 'rel="next"' in first and 'rel="prev"' not in first
    ids_1 = re.findall(r'href="/records/([\w-]+)"', first)
    second = c.get("/records?page=2").text
    ids_2 = re.findall(r'href="/records/([\w-]+)"', second)
    assert len(ids_1) == 50 and len(ids_2) == 48 and not set(ids_1) & set(ids_2)  # 98 records in all
    assert 'rel="prev"' in second and 'rel="next"' not in second
    session = re.findall(r'href="/records/([\w-]+)"', c.get("/records?session=sess-1").text)
    assert sorted(session) == ["helpful-03", "helpful-04", "helpful-05", "polite-03", "polite-04", "polite-05",
                               "session-1"]
    version = re.findall(r'href="/records/([\w-]+)"', c.get("/records?evaluator=helpful&version=v2").text)
    assert len(version) == 17


def test_the_record_page_shows_everything_the_record_holds(seeded):
    label("helpful-01", passed=False, note="too terse", by="ana", store=seeded)
    html = client(seeded).get("/records/helpful-01").text
    for text in ("question 1", "answer 1", "reason 1", "helpful-01", "run-01", "sess-0", "Support", "v1",
                 "ana", "too terse"):
        assert text in html, text


def test_a_session_page_shows_its_verdict_and_turns_in_order(seeded):
    html = client(seeded).get("/sessions/sess-1").text
    assert "the turns hang together" in html
    assert re.findall(r"turn \d+ <span class=\"mono\">(run-\d+)</span>", html) == ["run-03", "run-04", "run-05"]
    assert "sess-1" in client(seeded).get("/sessions").text


def test_a_session_graded_only_by_a_session_judge_shows_its_turns_from_its_record(server, make_agent, tmp_path):
    import judgehooks
    from judgehooks import SessionJudge, SQLiteStore

    store = SQLiteStore(tmp_path / "evals.db")
    judge = SessionJudge(criteria="Helps the user.", model="openai/judge", api_base=server.base_url, api_key="k",
                         store=store, outbox=str(tmp_path / "outbox.db"), idle_after=600, timeout=30)
    agent = make_agent(judge)
    runs = [agent.run(f"question {i}", session_id="only-sessions") for i in range(3)]
    [record] = judgehooks.end_session("only-sessions")
    assert store.query_sync(limit=None) == [record]  # no run record: the session verdict is all there is
    html = client(store).get("/sessions/only-sessions").text
    turns = re.findall(r'<section class="turn">\s*<h3>turn (\d) <span class="mono">([^<]+)</span>.*?</h3>'
                       r'(.*?)</section>', html, re.S)
    assert [(n, run) for n, run, _ in turns] == [(str(i + 1), r.run_id) for i, r in enumerate(runs)]
    shown = [{part: unescape(text) for part, text in re.findall(r'<pre class="text (input|output)">(.*?)</pre>', body,
                                                                    re.S)} for _, _, body in turns]
    assert shown == [{"input": "question 0"}, {}, {"output": runs[-1].content}]  # what the session record keeps
    notes = [re.findall(r'<p class="note unkept">(This turn.*?) not in the store', body) for _, _, body in turns]
    assert notes == [["This turn's answer is"], ["This turn's input and answer are"], ["This turn's input is"]]
    store.close()


def test_calibration_shows_kappa_its_interval_the_matrix_and_the_corrected_rate(seeded):
    for i in range(32):  # people agree with the judge on helpful v1 but for four records
        judge_passed = i % 2 == 0
        label(f"helpful-{i:02d}", passed=judge_passed if i >= 4 else not judge_passed, by="ana", store=seeded)
    html = client(seeded).get("/calibration?evaluator=helpful").text
    section = html.split('<span class="mono">v1</span>')[1].split("</section>")[0]
    assert "32 labelled record(s)" in section and "95% CI" in section
    cells = re.findall(r'<td class="num">(\d+)</td>', section.split("confusion matrix")[1])
    assert [int(c) for c in cells] == [14, 2, 2, 14]
    assert 'class="num corrected"' in section


def test_calibration_says_so_when_the_store_keeps_no_labels(seeded):
    class NoLabels(MemoryStore):
        async def read_labels(self):
            raise NotImplementedError("NoLabels does not keep human labels")

    store = NoLabels()
    runtime.call(store.write, seeded.query_sync(limit=None))
    assert "does not keep human labels" in client(store).get("/calibration").text


def test_review_pass_and_fail_store_labels_and_move_on(seeded):
    c = client(seeded, reviewer="ana")
    page = c.get("/review")
    token, first = csrf_of(page.text)
    assert first == "hostile-1"  # newest failed first
    moved = c.post("/review", data={"csrf": token, "record_id": first, "verdict": "fail", "note": "really bad",
                                    "queue": "failed,borderline"})
    assert moved.status_code == 303 and moved.headers["location"].startswith("/review")
    _, second = csrf_of(c.get(moved.headers["location"]).text)
    assert second != first
    c.post("/review", data={"csrf": token, "record_id": second, "verdict": "pass", "queue": "failed,borderline"})
    skipped = c.post("/review", data={"csrf": token, "record_id": csrf_of(c.get("/review").text)[1],
                                      "verdict": "skip", "queue": "failed,borderline"})
    assert "skip=" in skipped.headers["location"]
    labels = {lb.record_id: lb for lb in runtime.call(seeded.read_labels)}
    assert sorted(labels) == sorted([first, second])
    assert labels[first].passed is False and labels[first].note == "really bad" and labels[first].reviewer == "ana"
    assert labels[second].passed is True and labels[second].note is None


def test_the_review_page_takes_the_keys_judgehooks_review_takes(seeded):
    from judgehooks._cli.review import HELP

    html = client(seeded, reviewer="ana").get("/review").text
    buttons = dict(re.findall(r'<button type="submit" name="verdict" value="(\w+)" data-key="(\w)"', html))
    assert buttons == {"pass": "p", "fail": "f", "skip": "n"}
    hint = re.search(r"Keys: (.*?) \(as in <code>judgehooks review</code>\)", html).group(1)
    assert re.sub(r"</?kbd>", "", hint) == "p pass, f fail, n skip"
    for verdict, key in buttons.items():  # the terminal's help names the same key for the same verdict
        assert f"{key} = {verdict}" in HELP


def test_the_review_queue_ends_when_every_record_is_labelled(tmp_path):
    store = MemoryStore()
    runtime.call(store.write, [hostile_record()])
    c = client(store, reviewer="ana")
    token, record = csrf_of(c.get("/review").text)
    c.post("/review", data={"csrf": token, "record_id": record, "verdict": "pass"})
    assert "Nothing to review" in c.get("/review").text


@pytest.mark.parametrize("how", ["no token", "wrong token", "no cookie", "foreign origin", "json body"])
def test_a_label_post_without_its_csrf_token_is_refused(seeded, how):
    c = client(seeded, reviewer="ana")
    token, record = csrf_of(c.get("/review").text)
    form = {"csrf": token, "record_id": record, "verdict": "fail"}
    headers = {}
    if how == "no token":
        del form["csrf"]
    elif how == "wrong token":
        form["csrf"] = "x" * 43
    elif how == "no cookie":
        c.cookies.clear()
    elif how == "foreign origin":
        headers["origin"] = "http://evil.test"
    if how == "json body":
        reply = c.post("/review", json=form)
    else:
        reply = c.post("/review", data=form, headers=headers)
    assert reply.status_code == 403 and "CSRF" in reply.text
    assert runtime.call(seeded.read_labels) == []


def test_read_only_hides_review_and_refuses_label_posts(seeded):
    c = client(seeded, read_only=True)
    assert "/review" not in c.get("/").text and "read-only" in c.get("/").text
    assert c.get("/review").status_code == 404
    reply = c.post("/review", data={"csrf": "x" * 43, "record_id": "helpful-00", "verdict": "fail"},
                   cookies={"judgehooks_ui_csrf": "x" * 43})
    assert reply.status_code == 403
    assert runtime.call(seeded.read_labels) == []


@pytest.mark.parametrize("path", ["/", "/records/helpful-01", "/static/review.js", "/review"])
def test_with_a_token_every_request_must_show_it(seeded, path):
    token = "t0ken-" + "x" * 20
    c = client(seeded, token=token)
    assert c.get(path).status_code == 401
    assert c.get(path, headers={"authorization": "Bearer wrong-" + "x" * 20}).status_code == 401
    assert c.get(path, headers={"authorization": f"Bearer {token}"}).status_code == 200
    entered = c.get(f"{path}{'&' if '?' in path else '?'}token={token}")
    assert entered.status_code == 303 and "token" not in entered.headers["location"]
    assert entered.headers["location"] == path
    assert c.get(path).status_code == 200  # the cookie it set
    assert TestClient(app(seeded, token=token)).get(path, cookies={"judgehooks_ui_token": "nope"}).status_code == 401


def test_without_a_token_the_app_answers_only_this_machines_names_wherever_it_is_mounted(seeded):
    from fastapi import FastAPI

    outer = FastAPI()
    outer.mount("/evals", app(seeded))
    for base, status in (("http://127.0.0.1:7777", 200), ("http://[::1]:7777", 200), ("http://localhost", 200),
                         ("http://rebind.attacker.example:7777", 400), ("http://testserver", 400)):
        assert TestClient(outer, base_url=base).get("/evals/records").status_code == status, base


def test_allowed_hosts_names_the_hosts_a_served_app_answers_to(seeded):
    named = app(seeded, allowed_hosts=["Evals.Example.com", "::1"])
    assert TestClient(named, base_url="https://evals.example.com").get("/records").status_code == 200
    assert TestClient(named, base_url="http://[::1]:8765").get("/records").status_code == 200
    assert TestClient(named, base_url="http://127.0.0.1:8765").get("/records").status_code == 400
    assert TestClient(app(seeded, allowed_hosts=["*"]), base_url="http://any.example").get("/").status_code == 200
    for bad in (["http://evals.example.com"], ["evals.example.com:8080"], ["evals.example.com/ui"], [], "localhost"):
        with pytest.raises(ValueError, match="allowed_hosts"):
            app(seeded, allowed_hosts=bad)


def test_app_refuses_settings_it_cannot_use(seeded):
    with pytest.raises(ValueError, match="at least 16"):
        app(seeded, token="short")
    with pytest.raises(ValueError, match="trace_id"):
        app(seeded, trace_url="javascript:alert('{trace_id}')")
    with pytest.raises(TypeError, match="BaseStore"):
        app(object())


def test_mounted_under_a_prefix_every_link_stays_under_it(seeded):
    from fastapi import FastAPI

    outer = FastAPI()
    outer.mount("/evals", app(seeded, reviewer="ana"))
    c = TestClient(outer, base_url="http://localhost:8000", follow_redirects=False)
    html = c.get("/evals/").text
    links = re.findall(r'(?:href|src|action)="([^"]+)"', html)
    assert links and all(link.startswith("/evals/") for link in links), links
    token, record = csrf_of(c.get("/evals/review").text)
    moved = c.post("/evals/review", data={"csrf": token, "record_id": record, "verdict": "fail"})
    assert moved.status_code == 303 and moved.headers["location"].startswith("/evals/review")
    assert [lb.record_id for lb in runtime.call(seeded.read_labels)] == [record]


def test_a_stored_id_is_one_path_segment_in_every_link(seeded):
    from judgehooks import EvalRecord

    runtime.call(seeded.write, [EvalRecord(id="../review?x=1", status="failed", evaluator="e", mode="binary",
                                           passed=False, session_id="../../records")])
    html = client(seeded).get("/records?evaluator=e").text
    assert 'href="/records/..%2Freview%3Fx%3D1"' in html
    assert client(seeded).get("/records/..%2Freview%3Fx%3D1").status_code == 200
    detail = client(seeded).get("/records/..%2Freview%3Fx%3D1").text
    assert 'href="/sessions/..%2F..%2Frecords"' in detail


@pytest.mark.parametrize(("name", "value"), [("q", '" * ^'), ("meta", "no-equals-sign"), ("sort", "rowid; DROP"),
                                             ("order", "sideways"), ("since", "banana")])
def test_a_bad_records_filter_is_said_beside_its_field_in_the_kept_form(seeded, name, value):
    reply = client(seeded).get("/records", params={name: value, "agent": "support"})
    assert reply.status_code == 400
    beside = re.search(rf'name="{name}"[^>]*aria-invalid="true"[^>]*>.*?<span class="field-error" id="{name}-error">'
                       rf'(.*?)</span>', reply.text, re.S)
    assert beside and beside.group(1).startswith(name), reply.text[-600:]
    assert 'name="agent" value="support"' in reply.text  # the rest of the form kept as typed


def test_records_search_sort_user_and_metadata_filters_over_http(seeded):
    html = client(seeded).get("/records", params={"q": "zanzibar"}).text
    assert "helpful-13" in html and html.count('href="/records/') == 1
    rows = client(seeded).get("/records", params={"sort": "latency", "user": "u1", "meta": "plan=pro"}).text
    ids = re.findall(r'href="/records/(helpful-\d+)"', rows)
    assert ids and all(int(i[-2:]) % 3 == 1 and int(i[-2:]) % 2 == 1 for i in ids)
    assert ids == sorted(ids, key=lambda i: -((int(i[-2:]) * 7) % 48))
