"""Real servers for tests and benchmarks: a throwaway PostgreSQL cluster on 127.0.0.1.

initdb refuses to run as root, so as root the cluster is created and run as the `postgres`
user (`runuser -u postgres --`). The server is stopped by its PID (from postmaster.pid).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

HOW_TO_GET_POSTGRES = (
    "PostgreSQL server binaries not found: install them (Debian: `apt-get install -y postgresql`) "
    "or point JUDGEHOOKS_TEST_POSTGRES_DSN at a server you started (e.g. postgresql://postgres@127.0.0.1:5432/postgres)")


def postgres_bindir() -> str | None:
    """The newest /usr/lib/postgresql/<version>/bin, else the directory of `postgres` on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    on_path = shutil.which("postgres")
    return os.path.dirname(on_path) if on_path else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """A private PostgreSQL cluster in a temporary directory, listening on 127.0.0.1:<free port>."""

    def __init__(self, bindir: str | None = None, *, durable: bool = False) -> None:
        """``durable=False`` (tests) turns fsync off; benchmarks pass True for production settings."""
        self.bindir = bindir or postgres_bindir()
        if self.bindir is None:
            raise FileNotFoundError(HOW_TO_GET_POSTGRES)
        self.root = tempfile.mkdtemp(prefix="judgehooks-pg-")
        self.data = os.path.join(self.root, "data")
        self.port = free_port()
        self.pid: int | None = None
        self.durable = durable
        self._as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as_user:
            shutil.chown(self.root, "postgres", "postgres")
        self._run([f"{self.bindir}/initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "--no-sync",
                   "-E", "UTF8", "--locale=C"])

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, argv: list[str]) -> None:
        subprocess.run(self._as_user + argv, check=True, capture_output=True, text=True)

    def start(self, timeout: float = 30.0) -> PostgresServer:
        """Start (or restart, same data and port) and wait until it accepts connections."""
        log = os.path.join(self.root, "server.log")
        fast = "" if self.durable else "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        self._run([f"{self.bindir}/pg_ctl", "-D", self.data, "-l", log, "-s", "-o",
                   f"-h 127.0.0.1 -p {self.port} -k {self.root} {fast}-c max_connections=200", "start"])
        deadline = time.monotonic() + timeout
        while True:
            ready = subprocess.run([f"{self.bindir}/pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port)])
            if ready.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"PostgreSQL did not start on port {self.port}; see {log}")
            time.sleep(0.1)
        with open(os.path.join(self.data, "postmaster.pid")) as fh:
            self.pid = int(fh.readline())
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown by PID (SIGINT), waiting until the process is gone."""
        pid, self.pid = self.pid, None
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_database(admin_dsn: str, name: str) -> str:
    """CREATE DATABASE name on the server of admin_dsn; the DSN of the new database."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    p = conninfo_to_dict(admin_dsn)
    auth = p.get("user", "postgres") + (f":{quote(str(p['password']), safe='')}" if p.get("password") else "")
    return f"postgresql://{auth}@{p.get('host', '127.0.0.1')}:{p.get('port', 5432)}/{name}"


if __name__ == "__main__":  # .ci/run: start one server, print its DSN and PID, keep it running
    server = PostgresServer().start()
    print(server.dsn, server.pid, flush=True)


@contextmanager
def serve(app: object) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1:<free port> in a thread; stop it on exit."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, name="asgi-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(30)
