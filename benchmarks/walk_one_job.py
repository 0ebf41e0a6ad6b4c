"""The walk of one background job: which judgehooks modules it enters, in order, and how many times
the walk comes back to each one (a return counts when the walk enters a module again by a call after
leaving it; an `await` resuming the same coroutine is the same entry, not a new one).

    python benchmarks/walk_one_job.py                 # a job with the judge in this process
    python benchmarks/walk_one_job.py --path inline   # the same run graded inline, for comparison

Every thread is traced (`threading.setprofile` and `sys.setprofile`): the hook's thread, the
judgehooks loop thread and the worker threads that write SQLite. Warm-up first (one job through
the same evaluator), so imports and first-use set-up are not counted. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import threading
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from _common import stub_server, table  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

#: code that can suspend (generators, coroutines): entered once, resumed at each await
SUSPENDS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__import__("judgehooks").__file__)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--path", choices=("background", "inline"), default="background")
    args = parser.parse_args()
    import tempfile

    from agno.agent import Agent
    from agno.models.openai.like import OpenAILike

    import judgehooks
    from judgehooks import AgentAsJudgeEval, SQLiteStore

    with stub_server() as stub, tempfile.TemporaryDirectory() as tmp:
        lock = threading.Lock()
        walk: list[str] = []  # module names in the order entered (consecutive repeats folded)
        active = [False]

        started: dict[int, Any] = {}  # coroutine frames already entered: a later "call" is a resumption

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event != "call" or not active[0]:
                return
            path = frame.f_code.co_filename
            if not path.startswith(os.path.join(PACKAGE, "judgehooks")):
                return
            if frame.f_code.co_flags & SUSPENDS:
                if started.get(id(frame)) is frame.f_code:
                    return  # an await resumed: the same call going on, not a new entry
                started[id(frame)] = frame.f_code
            module = os.path.relpath(path, PACKAGE)
            with lock:
                if not walk or walk[-1] != module:
                    walk.append(module)

        # before judgehooks starts a thread (its loop, the worker threads): each is traced from its start
        threading.setprofile(profile)
        sys.setprofile(profile)
        evaluator = AgentAsJudgeEval(name="walk", criteria="The answer echoes the question.", model="openai/judge",
                                     api_base=stub.base_url, api_key="k", store=SQLiteStore(f"{tmp}/evals.db"),
                                     run_in_background=args.path == "background", judge_process=False)
        agent = Agent(model=OpenAILike(id="agent", base_url=stub.base_url, api_key="k"), telemetry=False)
        run_output = agent.run("What is the capital of France?")  # a real run's output, graded twice below
        try:
            run_output.run_id = "warm"
            evaluator.post_check(run_output, agent=agent)
            assert judgehooks.drain(60)
            run_output.run_id = "walked"
            active[0] = True
            evaluator.post_check(run_output, agent=agent)
            assert judgehooks.drain(60)
            active[0] = False
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        entries = Counter(walk)
        print(f"{args.path} job: {len(entries)} judgehooks modules entered, {len(walk)} entries in order")
        table("modules entered more than once (entries; returns = entries - 1)",
              ["module", "entries", "returns"],
              [[m, n, n - 1] for m, n in entries.most_common() if n > 1][:15])
        print("the walk:", " -> ".join(m.removeprefix("judgehooks/").removesuffix(".py") for m in walk))


if __name__ == "__main__":
    main()
