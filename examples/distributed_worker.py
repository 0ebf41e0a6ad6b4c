"""Distributed grading: the app's hooks publish to Redis, two `judgehooks worker` processes grade.

    python examples/distributed_worker.py        # needs redis-server (apt-get install redis-server)

The app's hook only persists each job and hands it off (Redis gets it from the judgehooks loop);
the workers (`judgehooks worker --broker ... --store ...`) judge and store. Uses $JUDGEHOOKS_BROKER
when set, else starts a throwaway redis-server; the judge is the scripted loopback server.

Jobs are signed with $JUDGEHOOKS_JOB_KEY (the same on the app and the workers; a throwaway one here),
and the workers rebuild AgentAsJudgeEval from each job's criteria with their own judge model and
server (`--rebuild`, `--judge-model`, `--judge-api-base`): a job never chooses where a worker's
provider key goes. In production, `--import myapp.evals` instead grades with your own evaluators.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import contextlib
import secrets
import signal
import subprocess
import sys
import tempfile
import time

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

import judgehooks
from judgehooks import AgentAsJudgeEval, SQLiteStore
from judgehooks.testing import RedisServer, StubLLMServer

tmp = tempfile.mkdtemp()
db = os.path.join(tmp, "evals.db")
with contextlib.ExitStack() as stack:
    broker = os.environ.get("JUDGEHOOKS_BROKER") or stack.enter_context(RedisServer()).url
    server = stack.enter_context(StubLLMServer())
    server.configure(judge_delay_ms=200)

    # Two workers; in production, run them on other machines with the same --broker and --store.
    os.environ.setdefault("JUDGEHOOKS_JOB_KEY", secrets.token_hex(32))  # signs jobs; workers refuse unsigned ones
    env = {**os.environ, "OPENAI_API_KEY": "no-key-needed"}  # workers take provider keys from their env
    workers = [subprocess.Popen([sys.executable, "-m", "judgehooks._cli", "worker", "--broker", broker,
                                 "--store", f"sqlite:///{db}", "--name", f"worker-{i}", "--concurrency", "8",
                                 "--rebuild", "AgentAsJudgeEval", "--judge-model", "openai/judge",
                                 "--judge-api-base", server.base_url],
                                stdout=subprocess.PIPE, text=True, env=env) for i in (1, 2)]
    for w in workers:
        print(w.stdout.readline().strip())

    judge = AgentAsJudgeEval(
        name="on-topic", criteria="The answer addresses the question.", model="openai/judge",
        api_base=server.base_url, run_in_background=True, broker=broker,
        store=SQLiteStore(db),  # the app's own records (only `skipped` ones, if Redis stays down under load)
        outbox=os.path.join(tmp, "app.outbox.db"),  # jobs wait here whenever Redis is unreachable
    )
    agent = Agent(model=OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed"),
                  post_hooks=[judge], telemetry=False)
    start = time.perf_counter()
    for i in range(20):
        agent.run(f"Question {i}" + (" [[fail]]" if i == 7 else ""))
    print(f"20 runs returned in {time.perf_counter() - start:.2f} s with a 200 ms judge")
    judgehooks.drain(timeout=30)
    print(f"forwarded to Redis: {judge.stats()['forwarded']}")

    store = SQLiteStore(db)
    deadline = time.monotonic() + 60
    while len(store.query_sync(limit=None)) < 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    records = store.query_sync(limit=None)
    print(f"{len(records)} records in the workers' store: "
          f"{sum(r.status == 'passed' for r in records)} passed, {sum(r.status == 'failed' for r in records)} failed")
    for w in workers:  # SIGTERM: finish running jobs, exit cleanly
        w.send_signal(signal.SIGTERM)
    for w in workers:
        print(w.communicate(timeout=60)[0].strip())
