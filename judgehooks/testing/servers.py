"""Throwaway servers on 127.0.0.1 for tests and demos: a webhook receiver and a redis-server."""

from __future__ import annotations

import json
import threading
import time
from typing import Any


class WebhookReceiver:
    """A real HTTP server on 127.0.0.1 (its own thread) that records the JSON bodies POSTed to it.

    For notifier tests and examples. ``status`` is the reply code (e.g. 500 to exercise retries);
    ``hang=True`` accepts connections and never answers (a receiver that is up but stuck).
    ``posts`` holds the bodies received, ``attempts`` counts requests whatever the reply."""

    def __init__(self, *, status: int = 200, hang: bool = False) -> None:
        self.status, self.hang = status, hang
        self.posts: list[Any] = []
        self.attempts = 0
        self._stopped = threading.Event()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "receiver not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def start(self) -> WebhookReceiver:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                receiver.attempts += 1
                if receiver.hang:
                    receiver._stopped.wait()
                    return
                if receiver.status < 300:
                    receiver.posts.append(json.loads(body or b"null"))
                self.send_response(receiver.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:  # silent, like the rest of the library
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="judgehooks-webhook-receiver",
                                        daemon=True)
        self._thread.start()
        return self

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Any]:
        """Wait until at least `count` bodies arrived; return them (raises TimeoutError otherwise)."""
        deadline = time.monotonic() + timeout
        while len(self.posts) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.posts)} of {count} webhook posts arrived within {timeout} s")
            time.sleep(0.01)
        return list(self.posts)

    def stop(self) -> None:
        self._stopped.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisServer:
    """A throwaway `redis-server` on 127.0.0.1 and a free port (no persistence), stopped by its PID.

    For distributed-grading tests and demos; needs the redis-server binary (Debian: redis-server).
    """

    def __init__(self, port: int = 0) -> None:
        self._port = port
        self.proc: Any = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self._port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        import shutil
        import socket
        import subprocess

        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)")
        if not self._port:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                self._port = sock.getsockname()[1]
        self.proc = subprocess.Popen([binary, "--port", str(self._port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self._port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self._port}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
                self.proc.wait(10)
            self.proc = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
