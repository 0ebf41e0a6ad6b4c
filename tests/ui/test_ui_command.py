"""`judgehooks ui`: one line naming the address, served until Ctrl-C; a bind beyond this machine
refused without a token; without one, only this machine's names reach it (no DNS rebinding)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _ui_fixtures import seeded_records

from judgehooks import SQLiteStore
from judgehooks._runtime import runtime

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
       "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
ENV.pop("JUDGEHOOKS_UI_TOKEN", None)


def _command(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from judgehooks._cli import main; sys.exit(main())", "ui", *args]


@pytest.mark.slow
def test_ui_prints_one_line_serves_the_store_and_stops_on_ctrl_c(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    runtime.call(store.write, seeded_records())
    store.close()
    proc = subprocess.Popen(_command("--store", str(tmp_path / "evals.db"), "--port", "0"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        line = proc.stdout.readline()
        assert line.startswith("judgehooks ui: http://127.0.0.1:") and line.endswith("/\n"), line
        url = line.split(": ", 1)[1].strip()
        port = int(url.rsplit(":", 1)[1].rstrip("/"))
        assert port not in (0, 8765)  # port 0: a free port, and the line names the real one
        page = httpx.get(url + "records?evaluator=polite", timeout=30)
        assert page.status_code == 200 and "polite-47" in page.text
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == "", out  # exactly one line in all


@contextlib.contextmanager
def ui_command(store_path: Path, *args: str) -> Iterator[str]:
    """`judgehooks ui` on a free port, as a user starts it; its address, and Ctrl-C at the end."""
    proc = subprocess.Popen(_command("--store", str(store_path), "--port", "0", *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        line = proc.stdout.readline()
        assert line.startswith("judgehooks ui: http://"), (line, proc.stderr.read() if not line else "")
        yield line.split(": ", 1)[1].strip().rstrip("/")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


REBOUND = "rebind.attacker.example"


def seeded_file(tmp_path: Path, count: int | None = None) -> Path:
    store = SQLiteStore(tmp_path / "evals.db")
    runtime.call(store.write, seeded_records()[:count])
    store.close()
    return tmp_path / "evals.db"


# DNS rebinding: a page at http://rebind.attacker.example:PORT/ has its name re-pointed at 127.0.0.1,
# so the browser sends the page's requests here, same-origin to the page, with that name as Host.

@pytest.mark.slow
def test_without_a_token_a_rebound_host_name_reads_nothing(tmp_path):
    with ui_command(seeded_file(tmp_path)) as url, httpx.Client(base_url=url, timeout=30) as http:
        port = url.rsplit(":", 1)[1]
        for path in ("/records/helpful-01", "/", "/review", "/static/review.js"):
            reply = http.get(path, headers={"host": f"{REBOUND}:{port}"})
            assert reply.status_code == 400, (path, reply.status_code)
            assert reply.text.startswith(f"judgehooks ui: refused: the Host '{REBOUND}:{port}' is not a name")
            assert "set-cookie" not in reply.headers  # no CSRF cookie to fill a form with
        for name in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1", f"LocalHost:{port}"):
            page = http.get("/records/helpful-01", headers={"host": name})  # this machine's names answer
            assert page.status_code == 200 and '<pre class="text input">question 1</pre>' in page.text, name


@pytest.mark.slow
def test_without_a_token_a_label_posted_through_a_rebound_host_name_is_refused(tmp_path):
    db = seeded_file(tmp_path)
    with ui_command(db) as url, httpx.Client(base_url=url, timeout=30) as http:
        port = url.rsplit(":", 1)[1]
        review = http.get("/review")  # a valid CSRF pair, read through 127.0.0.1, for the forger to use
        token = re.search(r'name="csrf" value="([^"]+)"', review.text).group(1)
        record = re.search(r'name="record_id" value="([^"]+)"', review.text).group(1)
        form = {"csrf": token, "record_id": record, "verdict": "fail"}
        rebound = http.post("/review", data=form, headers={"host": f"{REBOUND}:{port}",
                                                           "origin": f"http://{REBOUND}:{port}"})
        assert rebound.status_code == 400 and "is not a name of this server" in rebound.text
        from_rebound_page = http.post("/review", data=form, headers={"origin": f"http://{REBOUND}:{port}"})
        assert from_rebound_page.status_code == 403 and "another origin" in from_rebound_page.text
        assert labels_in(db) == []
        own = http.post("/review", data=form, headers={"origin": url})
        assert own.status_code == 303  # the page's own form, from its own origin, still labels
    assert [(lb.record_id, lb.passed) for lb in labels_in(db)] == [(record, False)]


@pytest.mark.slow
def test_the_loopback_address_it_listens_on_is_one_of_its_names(tmp_path):
    with ui_command(seeded_file(tmp_path, 2), "--host", "127.0.0.2") as url:
        assert url.startswith("http://127.0.0.2:")
        assert httpx.get(url + "/records/helpful-00", timeout=30).status_code == 200


@pytest.mark.slow
def test_with_a_token_a_rebound_host_still_needs_the_token(tmp_path):
    token = "t0ken-" + "y" * 20
    with ui_command(seeded_file(tmp_path, 2), "--token", token) as url, \
            httpx.Client(base_url=url, timeout=30) as http:
        rebound = {"host": f"{REBOUND}:{url.rsplit(':', 1)[1]}"}
        assert http.get("/records/helpful-00", headers=rebound).status_code == 401
        shown = http.get("/records/helpful-00", headers={**rebound, "authorization": f"Bearer {token}"})
        assert shown.status_code == 200  # a name of its own (a proxy in front): the token is what guards it


def labels_in(path: Path) -> list:
    store = SQLiteStore(path)
    try:
        return runtime.call(store.read_labels)
    finally:
        store.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1", "::"])
def test_ui_refuses_to_listen_beyond_this_machine_without_a_token(tmp_path, host):
    from judgehooks._cli import main

    store = SQLiteStore(tmp_path / "evals.db")
    runtime.call(store.write, seeded_records()[:1])
    store.close()
    assert main(["ui", "--store", str(tmp_path / "evals.db"), "--host", host]) == 2


def test_ui_says_which_hosts_are_this_machine():
    from judgehooks._cli.ui import loopback

    assert loopback("127.0.0.1") and loopback("127.8.0.1") and loopback("::1") and loopback("localhost")
    assert not loopback("0.0.0.0") and not loopback("::") and not loopback("example.com")


def test_ui_on_a_missing_store_file_says_so(tmp_path, capsys):
    from judgehooks._cli import main

    assert main(["ui", "--store", str(tmp_path / "typo.db")]) == 1
    assert "cannot open store" in capsys.readouterr().err
