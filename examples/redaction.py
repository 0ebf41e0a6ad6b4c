"""Redaction: personal data and secrets never leave the process, not to the judge, not to the store.

    python examples/redaction.py

No API key and no network: the agent and the judge run on the scripted loopback server
(`judgehooks.testing`). The agent looks a customer up with a tool whose result holds an email, a
phone number, a card number and an IBAN; `redact=PII` masks them in the snapshot, before the judge,
the store or a callback sees the run. A redactor that raises withholds the run's text instead.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

from judgehooks import AgentAsJudgeEval, MemoryStore
from judgehooks.redact import PII
from judgehooks.testing import StubLLMServer


def lookup(text: str) -> str:
    """Look a customer up."""
    return "alice.smith@example.com, +49 30 1234567, card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00"


def broken(text: str) -> str:
    raise RuntimeError("the redaction service is down")


def main() -> None:
    with StubLLMServer() as server:
        store = MemoryStore()
        connection = {"model": "openai/judge", "api_base": server.base_url, "api_key": "no-key-needed",
                      "store": store, "include_tool_calls": True}
        judge = AgentAsJudgeEval(name="helpful", criteria="The answer uses the customer record.", redact=PII,
                                 **connection)
        model = OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed")
        agent = Agent(model=model, tools=[lookup], post_hooks=[judge], telemetry=False)
        out = agent.run("Who is customer 42? My key is sk-proj-Zq8vN3kLp0RtYw6XbC2dFh [[tool=lookup]]")
        print("what the agent's caller receives (untouched):\n ", out.content)
        [record] = store.records
        print(f"\nwhat the store keeps (redacted_by={record.redacted_by!r}):")
        print("  input: ", record.input)
        print("  output:", record.output)
        print("\nwhat the judge was sent (the stub server's log of its last request):")
        prompt = server.settings.judge_prompts[-1]
        print(" ", prompt[prompt.index("Who is customer"):][:200].replace("\n", " "), "...")

        failing = AgentAsJudgeEval(name="strict", criteria="c", redact=broken, **connection)
        Agent(model=model, tools=[lookup], post_hooks=[failing], telemetry=False).run("Customer 43? [[tool=lookup]]")
        error = store.records[-1]
        print(f"\na redactor that raises: {error.status} ({error.error_type}), input={error.input!r}, "
              f"output={error.output!r}")
        print(" ", error.error_message)


if __name__ == "__main__":
    main()
