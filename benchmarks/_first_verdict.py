"""One fresh process's first verdict: import, build an agent with its judge, run once, store the verdict.

    python benchmarks/_first_verdict.py {agno|judgehooks|pydantic-evals} BASE_URL DIR

`bench_core.py` times whole processes of this (interpreter start to exit, the exit drain included),
alternating the peers. Each stores its one verdict where it keeps verdicts: agno and judgehooks in
SQLite, pydantic-evals (which has no store) through its sink into SQLite. The verdict is checked
before the process exits, so a process that stored nothing fails the benchmark.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
CRITERIA = "The answer echoes the question."


def agno(base_url: str, folder: str) -> int:
    from agno.agent import Agent
    from agno.db.sqlite import SqliteDb
    from agno.eval.agent_as_judge import AgentAsJudgeEval
    from agno.models.openai.like import OpenAILike

    db = SqliteDb(db_file=f"{folder}/agno.db")
    judge = AgentAsJudgeEval(criteria=CRITERIA, model=OpenAILike(id="judge", base_url=base_url, api_key="bench"),
                             db=db, telemetry=False, show_spinner=False)
    agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="bench"), telemetry=False,
                  post_hooks=[judge])
    agent.run("What is the capital of France?")
    return len(db.get_eval_runs() or [])


def judgehooks(base_url: str, folder: str) -> int:
    from agno.agent import Agent
    from agno.models.openai.like import OpenAILike

    from judgehooks import AgentAsJudgeEval, SQLiteStore

    store = SQLiteStore(f"{folder}/ours.db")
    judge = AgentAsJudgeEval(criteria=CRITERIA, model="openai/judge", api_base=base_url, api_key="bench", store=store)
    agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="bench"), telemetry=False,
                  post_hooks=[judge])
    agent.run("What is the capital of France?")
    return sum(1 for r in store.query_sync(limit=None) if r.status in ("passed", "failed"))


def pydantic_evals(base_url: str, folder: str) -> int:
    from agno.agent import Agent
    from agno.models.openai.like import OpenAILike
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_evals.evaluators import LLMJudge
    from pydantic_evals.online import OnlineEvalConfig, OnlineEvaluator, wait_for_evaluations

    db = sqlite3.connect(f"{folder}/pydantic.db", check_same_thread=False)  # the sink runs on its thread
    db.execute("create table if not exists verdicts (value text)")

    def sink(results, *rest) -> None:  # noqa: ANN001
        db.execute("insert into verdicts values (?)", (repr(results),))
        db.commit()

    judge = LLMJudge(rubric=CRITERIA, include_input=True,
                     model=OpenAIChatModel("judge", provider=OpenAIProvider(base_url=base_url, api_key="bench")))
    agent = Agent(model=OpenAILike(id="agent", base_url=base_url, api_key="bench"), telemetry=False)
    config = OnlineEvalConfig(default_sink=sink, emit_otel_events=False)

    @config.evaluate(OnlineEvaluator(evaluator=judge))
    def answer(question: str) -> str:
        return str(agent.run(question).content)

    answer("What is the capital of France?")
    asyncio.run(wait_for_evaluations())  # joins the evaluation threads of a sync function
    return db.execute("select count(*) from verdicts").fetchone()[0]


if __name__ == "__main__":
    which, base, where = sys.argv[1:4]
    stored = {"agno": agno, "judgehooks": judgehooks, "pydantic-evals": pydantic_evals}[which](base, where)
    if stored < 1:
        raise SystemExit(f"{which}: no verdict stored")
