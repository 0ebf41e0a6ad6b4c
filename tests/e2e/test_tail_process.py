"""`judgehooks tail` in a real process: Ctrl-C as a terminal sends it (only a process has signals and
an interpreter shutdown for a second Ctrl-C to land in), and a PostgreSQL it follows going away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from judgehooks import Contains, SQLiteStore

# Python's own SIGINT handler (a suite started from a script that ignores SIGINT hands SIG_IGN down),
# then the command. The user's second Ctrl-C is sent when the process is shutting down, from an
# exit hook that runs while it does (after the runtime's, which atexit runs first): the moment a
# real impatient user hits, here every time rather than by chance.
TWICE = ("import atexit, os, runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
         "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT)); "
         "sys.argv[0] = 'judgehooks'; runpy.run_module('judgehooks._cli', run_name='__main__')")
ONCE = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'judgehooks'; runpy.run_module('judgehooks._cli', run_name='__main__')")


@pytest.mark.slow
def test_ctrl_c_again_while_tail_shuts_down_prints_no_traceback(tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    Contains("x", name="has-x", store=store).run(input="q", output="x")
    store.close()
    proc = subprocess.Popen([sys.executable, "-c", TWICE, "tail", "--store", str(tmp_path / "evals.db"),
                             "--interval", "0.05"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    try:
        assert "has-x" in proc.stdout.readline()  # following now
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert code == 0  # tail's Ctrl-C is how it is stopped: not an error, the second one neither


@pytest.mark.slow
def test_a_postgres_outage_while_tail_follows_is_one_line_and_a_back_line(private_postgres, tmp_path):
    """A stopped PostgreSQL used to print a line per poll (every --interval) for as long as it was down."""
    pytest.importorskip("psycopg")
    import queue
    import threading

    from _servers import create_database

    from judgehooks import PostgresStore

    dsn = create_database(private_postgres.dsn, "evals")
    Contains("x", name="has-x", store=PostgresStore(dsn)).run(input="q", output="x")
    proc = subprocess.Popen([sys.executable, "-c", ONCE, "tail", "--store", dsn, "--interval", "0.01"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    errors: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [errors.put(line) for line in proc.stderr], daemon=True).start()
    try:
        assert "has-x" in proc.stdout.readline()  # following now
        private_postgres.stop()  # by PID: every poll now fails, a hundred a second
        first = errors.get(timeout=60)
        assert "cannot read store" in first, first
        private_postgres.start()  # seconds of polls failing meanwhile
        back = errors.get(timeout=120)
        assert "answers again" in back, back  # the very next line: no line per failed poll
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
