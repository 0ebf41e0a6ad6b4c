"""Shared fixtures: the loopback OpenAI-compatible server, agents and judges that talk to it."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# judgehooks' per-user state folder (the outbox of a store that is not a SQLite file) is this test
# process's own, set before any test module builds an evaluator: never the real user's.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="judgehooks-state-")

import gc
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from agno.team import Team

from judgehooks import AgentAsJudgeEval, EvalRecord, MemoryStore
from judgehooks._judges.litellm import load_litellm
from judgehooks.testing import StubLLMServer

# The per-test gc.collect() below walks every tracked object. agno and litellm make that heap large
# (about 0.5 s a walk), so import litellm now and freeze what the imports made: later collections
# walk only what tests created. (judgehooks imports litellm lazily; the tests that prove so run a
# fresh interpreter.)
load_litellm()
gc.collect()
gc.freeze()

#: the repository's root (tests run in a directory of their own: see _own_working_directory)
ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection imported too (test modules, agno.os, fastapi, ...), for the same reason."""
    gc.collect()
    gc.freeze()


def worker_index() -> int:
    """0, 1, 2, ... for pytest-xdist's workers gw0, gw1, ...; 0 without xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


@pytest.fixture(scope="session", autouse=True)
def _own_working_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each test process works in a directory of its own: a file a test leaves in the working
    directory (./judgehooks.db, say) never lands in the repository or in another worker's way."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(before)


@pytest.fixture(scope="session")
def server() -> StubLLMServer:
    with StubLLMServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh_server(server: StubLLMServer) -> None:
    server.reset()
    structlog.reset_defaults()  # capture_logs() leaves structlog marked as configured
    yield
    # openai's AsyncClient.__del__ schedules aclose() on whatever loop is running when it is
    # collected; collect this test's clients now, while no loop runs, not inside the next test.
    # Then freeze what survived (session fixtures, caches), so the next collection walks only what
    # the next test makes: an object frozen here that dies later is freed by its reference count,
    # or, in a cycle, never collected at all (so never finalised on a running loop either).
    gc.collect()
    gc.freeze()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def make_judge(server: StubLLMServer, store: MemoryStore) -> Callable[..., AgentAsJudgeEval]:
    def make(**kwargs: Any) -> AgentAsJudgeEval:
        settings: dict[str, Any] = {
            "criteria": "The answer echoes the question.",
            "model": "openai/judge",
            "api_base": server.base_url,
            "api_key": "test-key",
            "store": store,
            "retry_backoff": 0.01,
            "timeout": 10,
        }
        settings.update(kwargs)
        return AgentAsJudgeEval(**settings)

    return make


def model(server: StubLLMServer) -> OpenAILike:
    return OpenAILike(id="agent", base_url=server.base_url, api_key="test-key")


@pytest.fixture
def make_agent(server: StubLLMServer) -> Callable[..., Agent]:
    def make(*hooks: Any, **kwargs: Any) -> Agent:
        return Agent(model=model(server), post_hooks=list(hooks), telemetry=False, **kwargs)

    return make


@pytest.fixture
def make_team(server: StubLLMServer) -> Callable[..., Team]:
    def make(*hooks: Any, **kwargs: Any) -> Team:
        member = Agent(model=model(server), name="member", telemetry=False)
        return Team(members=[member], model=model(server), post_hooks=list(hooks), telemetry=False, **kwargs)

    return make


def rec(i: int, **kw) -> EvalRecord:
    base = dict(id=f"id-{i}", status="passed", evaluator="e", mode="numeric", threshold=7, score=8.0,
                passed=True, agent_id="a", run_id=f"run-{i}", metadata={"k": i})
    base.update(kw)
    return EvalRecord(**base)


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll until predicate() is true (for callbacks that run on worker threads)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met within timeout")
        time.sleep(0.01)


# ---- Redis: $JUDGEHOOKS_TEST_REDIS_URL (set by .ci/run), else a redis-server started here ---------

@pytest.fixture(scope="session")
def redis_base() -> str:
    """$JUDGEHOOKS_TEST_REDIS_URL (what .ci/run exports), else a redis-server started here (per worker)."""
    from judgehooks.testing import RedisServer

    url = os.environ.get("JUDGEHOOKS_TEST_REDIS_URL")
    if url:
        # One server, one logical database per pytest-xdist worker: a test's FLUSHDB and the fixed
        # stream names never reach another worker's tests.
        yield f"{url.rsplit('/', 1)[0]}/{1 + worker_index() % 15}"
        return
    try:
        server = RedisServer().start()
    except FileNotFoundError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{exc}: CI must provide Redis (.ci/run installs and starts it)")
        pytest.skip(f"{exc}, or set JUDGEHOOKS_TEST_REDIS_URL=redis://127.0.0.1:6379/0")
    yield server.url
    server.stop()


# ---- PostgreSQL: $JUDGEHOOKS_TEST_POSTGRES_DSN (set by .ci/run), else a private server -----------

def _postgres_server():
    """A started PostgresServer; skipped locally, and a failure in CI, when PostgreSQL is missing."""
    from _servers import HOW_TO_GET_POSTGRES, PostgresServer, postgres_bindir

    if postgres_bindir() is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but no PostgreSQL: {HOW_TO_GET_POSTGRES}")
        pytest.skip(HOW_TO_GET_POSTGRES)
    return PostgresServer().start()


@pytest.fixture(scope="session")
def postgres_admin_dsn() -> str:
    """A superuser DSN on a real PostgreSQL server shared by the session."""
    dsn = os.environ.get("JUDGEHOOKS_TEST_POSTGRES_DSN")
    if dsn:
        yield dsn
        return
    server = _postgres_server()
    try:
        yield server.dsn
    finally:
        server.close()


@pytest.fixture
def postgres_dsn(postgres_admin_dsn: str) -> str:
    """A fresh database for this test on the shared server."""
    import uuid

    from _servers import create_database

    return create_database(postgres_admin_dsn, f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def private_postgres():
    """A PostgreSQL server of this test's own, which the test may stop and restart."""
    server = _postgres_server()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(params=["direct", "sdk"])
def transport(request, monkeypatch) -> str:
    """The wire client's poster: its own aiohttp session (what judgehooks picks), or the OpenAI SDK's
    client on the SDK's aiohttp transport (what a base URL the environment proxies takes; here every
    base URL, with no proxy set). Posters built earlier on a loop that outlives the test (the
    judgehooks loop) are set aside for the test's duration."""
    from judgehooks._judges import transport, wire

    monkeypatch.setattr(transport, "_POSTERS", weakref.WeakKeyDictionary())
    if request.param == "sdk":
        monkeypatch.setattr(wire, "proxied", lambda base_url: True)
    return request.param


def serve_until_drained(worker: Any, rds: Any, stream: str) -> None:
    """Run a Redis `Worker` until `stream` is empty (every job taken and acked), then stop it."""
    import asyncio

    async def serve() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.serve(stop))
        while rds.xlen(stream):
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(task, 30)

    asyncio.run(serve())
