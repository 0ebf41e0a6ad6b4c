"""`judgehooks ui`: one line naming the address, served until Ctrl-C; a bind beyond this machine
refused without a token."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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
