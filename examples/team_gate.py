"""A quality gate on a Team: a failed verdict never reaches the caller; repair re-runs first.

    python examples/team_gate.py

No API key and no network: the team's model and the judge talk over real HTTP to the scripted
loopback server in `judgehooks.testing`, whose judge fails any answer containing `[[fail]]`, and
fails only the first answer containing `[[fail_first=1]]` (so a repaired answer passes).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent
from agno.models.openai.like import OpenAILike
from agno.run.team import RunContentEvent, RunErrorEvent
from agno.team import Team

from judgehooks import AgentAsJudgeEval, MemoryStore
from judgehooks.testing import StubLLMServer

FALLBACK = "I can't answer that reliably right now; a colleague will follow up by email."


def main() -> None:
    with StubLLMServer() as server:
        def model() -> OpenAILike:
            return OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed")

        store = MemoryStore()
        connection = {"model": "openai/judge", "api_base": server.base_url, "api_key": "no-key-needed",
                      "store": store}
        gate = AgentAsJudgeEval(name="support-quality", criteria="The reply is accurate and polite.",
                                gate=True, fallback=FALLBACK, **connection)
        team = Team(name="Support", model=model(), telemetry=False, post_hooks=[gate],
                    members=[Agent(name="Researcher", model=model(), telemetry=False)])

        out = team.run("Where is my order?")
        print(f"passed:   status={out.status.value} content={out.content!r}")
        out = team.run("Refund me now! [[fail]]")
        print(f"blocked:  status={out.status.value} content={out.content!r}")

        # Streaming: the text is on the wire before the verdict exists; the gate ends the stream with
        # a RunErrorEvent carrying the fallback instead of a RunCompletedEvent.
        streamed, last = "", None
        for event in team.run("Stream a reply [[fail]]", stream=True, stream_events=True):
            if isinstance(event, RunContentEvent) and event.content:
                streamed += event.content
            last = event
        assert isinstance(last, RunErrorEvent)
        print(f"stream:   streamed {streamed!r}, then {type(last).__name__}: {last.content!r}")

        # Repair: re-run the team with the judge's reason as guidance, up to 2 times, before blocking.
        repairing = AgentAsJudgeEval(name="support-repair", criteria="The reply is accurate and polite.",
                                     repair=2, fallback=FALLBACK, **connection)
        team = Team(name="Support", model=model(), telemetry=False, post_hooks=[repairing],
                    members=[Agent(name="Researcher", model=model(), telemetry=False)])
        out = team.run("Where is my refund? [[fail_first=1]]")
        attempts = [r for r in store.records if r.evaluator == "support-repair"]
        print(f"repaired: status={out.status.value} after {len(attempts) - 1} repair(s); "
              f"verdicts {[r.status for r in attempts]}")
        print(f"          the caller got: {out.content.splitlines()[0]!r} ...")
        print(f"records:  {len(store.records)} stored, one per graded run and repair attempt")


if __name__ == "__main__":
    main()
