"""Serve the web pages over a store: overview, records, review, calibration, sessions."""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
from typing import Any

from .common import open_store
from .options import TOKEN_ENV, CommandError
from .terminal import say


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
                          failure_namer=args.name_failures,
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
