"""A fixture of the optimize command's tests: a user's project for `judgehooks optimize`. A module of its
own, not a conftest.py: a second conftest module would shadow tests/conftest.py for `from conftest import ...`."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid

import pytest
from _world import ORIGINAL, World


@pytest.fixture
def project(tmp_path, server):
    """A user's module with the agent and the evaluator, and the failures `judgehooks export` wrote."""
    package = f"shop_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "app.py").write_text(textwrap.dedent(f"""
        from agno.agent import Agent
        from agno.models.openai.like import OpenAILike
        from judgehooks import AgentAsJudgeEval, MemoryStore

        agent = Agent(model=OpenAILike(id="agent", base_url={server.base_url!r}, api_key="k"),
                      instructions={ORIGINAL!r}, telemetry=False)
        capitals = AgentAsJudgeEval(criteria="The answer is in capital letters.", model="openai/judge",
                                    api_base={server.base_url!r}, api_key="k", name="capitals", store=MemoryStore())
    """))
    world = World(server)
    cases = tmp_path / "failures.jsonl"
    cases.write_text("".join(json.dumps({"id": c["id"], "input": c["input"], "output": c["input"].lower(),
                                         "metadata": {"reason": "the answer must be in capital letters"}}) + "\n"
                             for c in world.cases(20)))
    yield tmp_path, package, world
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]
