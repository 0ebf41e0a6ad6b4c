"""Ctrl-C on `judgehooks tail`, as a terminal sends it, in a real process: only one has signals and
an interpreter shutdown for a second Ctrl-C to land in."""

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
