"""Throwaway servers on 127.0.0.1 for tests and demos: a webhook receiver and a redis-server."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

# Slack's documented Block Kit limits, as its incoming webhooks enforce them (HTTP 400 beyond).
_SLACK_LIMITS = {"blocks": 50, "section text": 3000, "field text": 2000, "fields": 10, "header": 150,
                 "text": 40000}


def slack_problem(body: Any) -> str | None:
    """Why Slack would refuse this incoming-webhook message (its 400 reply), or None."""
    if not isinstance(body, dict):
        return "invalid_payload"
    blocks = body.get("blocks") or []
    if len(blocks) > _SLACK_LIMITS["blocks"]:
        return "invalid_blocks: more than 50 blocks"
    if len(str(body.get("text") or "")) > _SLACK_LIMITS["text"]:
        return "invalid_payload: text too long"
    for block in blocks:
        text = (block.get("text") or {}).get("text") or ""
        if block.get("type") == "header" and len(text) > _SLACK_LIMITS["header"]:
            return "invalid_blocks: header text longer than 150"
        if block.get("type") == "section" and len(text) > _SLACK_LIMITS["section text"]:
            return "invalid_blocks: section text longer than 3000"
        fields = block.get("fields") or []
        if len(fields) > _SLACK_LIMITS["fields"]:
            return "invalid_blocks: more than 10 fields"
        if any(len(f.get("text") or "") > _SLACK_LIMITS["field text"] for f in fields):
            return "invalid_blocks: field text longer than 2000"
    return None


class WebhookReceiver:
    """A real HTTP server on 127.0.0.1 (its own thread) that records the JSON bodies POSTed to it.

    For notifier tests and examples. ``status`` is the reply code (e.g. 500 to exercise retries);
    ``hang=True`` accepts connections and never answers (a receiver that is up but stuck);
    ``drip=0.5`` answers 200 but sends its body one byte every 0.5 s, never finishing (a receiver
    that trickles); ``slack=True`` refuses with 400, as Slack does, a message beyond Slack's limits
    (`slack_problem`). ``posts`` holds the bodies accepted, ``rejected`` the (body, problem) pairs
    refused, ``attempts`` counts requests whatever the reply."""

    def __init__(self, *, status: int = 200, hang: bool = False, drip: float | None = None,
                 slack: bool = False) -> None:
        self.status, self.hang, self.drip, self.slack = status, hang, drip, slack
        self.posts: list[Any] = []
        self.rejected: list[tuple[Any, str]] = []
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
                if receiver.drip is not None:
                    self._drip(receiver.drip)
                    return
                data = json.loads(body or b"null")
                problem = slack_problem(data) if receiver.slack else None
                status = 400 if problem else receiver.status
                if problem:
                    receiver.rejected.append((data, problem))
                elif status < 300:
                    receiver.posts.append(data)
                reply = (problem or "").encode()
                self.send_response(status)
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def _drip(self, every: float) -> None:
                self.send_response(200)
                self.send_header("content-length", "1000000")
                self.end_headers()
                try:
                    while not receiver._stopped.wait(every):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                except OSError:  # the client gave up
                    pass

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
