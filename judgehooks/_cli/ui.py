"""Serve the web pages over a store: overview, records, review, calibration, sessions."""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
from typing import Any

from .common import CommandError, add_store_argument, count, open_store
from .terminal import say

#: where the access token may also come from, so it stays out of `ps` and the shell history
TOKEN_ENV = "JUDGEHOOKS_UI_TOKEN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; any other needs --token)")
    parser.add_argument("--port", type=count, default=8765, help="port (default 8765; 0 picks a free one)")
    parser.add_argument("--read-only", action="store_true", help="no review page: nothing is written to the store")
    parser.add_argument("--token", metavar="TOKEN",
                        help=f"every request must show this access token (default: ${TOKEN_ENV}); needed "
                             "to listen beyond this machine")
    parser.add_argument("--trace-url", metavar="URL",
                        help="link trace ids to this address, with {trace_id} in it "
                             "(e.g. http://localhost:6006/trace/{trace_id})")


def loopback(host: str) -> bool:
    """Whether `host` is this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from .._ui import app
        from .._ui.guard import LOOPBACK_HOSTS
    except ImportError as exc:
        raise CommandError(f"ui needs the ui extra: pip install 'judgehooks[ui]' ({exc})") from None
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if not loopback(args.host) and token is None:
        raise CommandError(f"ui: listening on {args.host} lets other machines read every record: set an access "
                           f"token (--token or ${TOKEN_ENV}), or keep --host 127.0.0.1", code=2)
    store = open_store(args.store, must_exist=True)
    try:
        # without a token, only this machine's names reach it (no DNS rebinding), the one it listens on too
        hosts = None if token is not None else (*LOOPBACK_HOSTS, args.host)
        application = app(store, read_only=args.read_only, token=token, trace_url=args.trace_url,
                          allowed_hosts=hosts)
    except ValueError as exc:
        raise CommandError(f"ui: {exc}", code=2) from None
    sock = _listen(args.host, args.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    say(f"judgehooks ui: http://{shown}:{port}/", one_line=True)
    server = uvicorn.Server(uvicorn.Config(application, log_level="warning", access_log=False, lifespan="off"))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn stopped gracefully, then re-raised the Ctrl-C it caught: the normal end
        pass
    finally:
        sock.close()
    return 0


def _listen(host: str, port: int) -> Any:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CommandError(f"ui: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    return sock
