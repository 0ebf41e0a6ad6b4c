"""Background grading inside a FastAPI app: responses leave before their verdicts; verdicts land after.

    python examples/fastapi_app.py                 # start the app, send a few requests, show the verdicts, exit
    python examples/fastapi_app.py --serve --port 8000
        curl -X POST 'http://127.0.0.1:8000/ask?q=Hello'   then   curl http://127.0.0.1:8000/evals

The agent's post hook persists each evaluation in the outbox and hands it to judgehooks' own event
loop, so a request never waits for the judge, whether the route is async or sync. Uses the
scripted loopback server from `judgehooks.testing` (no key, no network) with a slow 300 ms judge.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import tempfile
import threading
import time

import httpx
import uvicorn
from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from fastapi import FastAPI

import judgehooks
from judgehooks import AgentAsJudgeEval, SQLiteStore
from judgehooks.testing import StubLLMServer


def build_app(model_url: str, db_path: str) -> FastAPI:
    judge = AgentAsJudgeEval(
        name="on-topic", criteria="The answer stays on the user's question.", model="openai/judge",
        api_base=model_url, api_key="no-key-needed", store=SQLiteStore(db_path),
        run_in_background=True, on_fail=lambda r: print(f"  on_fail: run {r.run_id[:8]}: {r.reason}", flush=True))
    agent = Agent(id="api-agent", name="api-agent", post_hooks=[judge], telemetry=False,
                  model=OpenAILike(id="agent", base_url=model_url, api_key="no-key-needed"))
    app = FastAPI(title="judgehooks FastAPI example")

    @app.post("/ask")
    async def ask(q: str, user_id: str = "anonymous") -> dict:
        out = await agent.arun(q, user_id=user_id)
        return {"run_id": out.run_id, "answer": out.content}

    @app.post("/ask-sync")
    def ask_sync(q: str, user_id: str = "anonymous") -> dict:  # FastAPI runs it on a worker thread
        out = agent.run(q, user_id=user_id)
        return {"run_id": out.run_id, "answer": out.content}

    @app.get("/evals")
    async def evals(run_id: str | None = None, limit: int = 50) -> list[dict]:
        records = await judge.store.query(agent_id="api-agent", run_id=run_id, limit=limit)
        return [r.model_dump(mode="json", include={"run_id", "status", "passed", "reason", "user_id", "input"})
                for r in records]

    @app.get("/stats")
    def stats() -> dict:
        return judgehooks.stats()

    return app


def start(app: FastAPI, port: int) -> tuple[uvicorn.Server, threading.Thread, int]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return server, thread, server.servers[0].sockets[0].getsockname()[1]


def demo(base: str) -> None:
    with httpx.Client(base_url=base, timeout=30) as client:
        asked = []
        for i, q in enumerate(["Where is my order?", "Cancel my plan [[fail]]", "What are your hours?"]):
            route = "/ask" if i % 2 == 0 else "/ask-sync"
            started = time.perf_counter()
            reply = client.post(route, params={"q": q, "user_id": f"user-{i}"}).json()
            graded_yet = client.get("/evals", params={"run_id": reply["run_id"]}).json()
            print(f"POST {route} {q!r}: answered in {1000 * (time.perf_counter() - started):.0f} ms, "
                  f"verdict stored yet: {bool(graded_yet)}")
            asked.append(reply["run_id"])
        judgehooks.drain(timeout=60)
        verdicts = client.get("/evals").json()
    print(f"\nafter drain: {len(verdicts)} verdicts for {len(asked)} requests")
    for v in sorted(verdicts, key=lambda v: v["user_id"]):
        print(f"  {v['user_id']}  {v['status']:7} {v['input']!r}: {v['reason']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="keep serving until Ctrl-C")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args()
    db_path = os.path.join(tempfile.mkdtemp(prefix="judgehooks-fastapi-"), "verdicts.db")
    with StubLLMServer() as models:
        models.configure(judge_delay_ms=300)
        server, thread, port = start(build_app(models.base_url, db_path), args.port)
        print(f"app on http://127.0.0.1:{port} (verdicts in {db_path})")
        try:
            if args.serve:
                thread.join()
            else:
                demo(f"http://127.0.0.1:{port}")
        except KeyboardInterrupt:
            pass
        finally:
            server.should_exit = True
            thread.join(timeout=10)


if __name__ == "__main__":
    main()
