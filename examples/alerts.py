"""Alerting: a webhook per failed run, one windowed alert per incident, and a dead receiver that
costs the run nothing.

    python examples/alerts.py

No API key and no network: the agent, the judge and the webhook receiver all run on 127.0.0.1
(`judgehooks.testing`). The judge fails any answer containing `[[fail]]`.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import socket
import time

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

import judgehooks
from judgehooks import AgentAsJudgeEval, MemoryStore, SlackNotifier, WebhookNotifier, WindowedAlert
from judgehooks.testing import StubLLMServer, WebhookReceiver


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    with StubLLMServer() as server, WebhookReceiver() as receiver:
        connection = {"model": "openai/judge", "api_base": server.base_url, "api_key": "no-key-needed",
                      "store": MemoryStore()}
        webhook = WebhookNotifier(receiver.url)             # one POST per failed run
        alert = WindowedAlert(SlackNotifier(receiver.url),   # one Slack message per incident
                              threshold=0.8, last_n=10, min_evaluations=5, cooldown=600)
        judge = AgentAsJudgeEval(name="helpful", criteria="The answer is correct.", on_fail=webhook,
                                 on_record=alert, **connection)
        def helpdesk(*hooks: AgentAsJudgeEval) -> Agent:
            return Agent(name="Helpdesk", id="helpdesk", telemetry=False, post_hooks=list(hooks),
                         model=OpenAILike(id="agent", base_url=server.base_url, api_key="no-key-needed"))

        agent = helpdesk(judge)

        for i in range(12):
            agent.run(f"question {i}" + (" [[fail]]" if i >= 4 and i % 2 == 0 else ""))
        judgehooks.drain(timeout=10)  # also waits for queued webhook deliveries
        kinds = [post.get("kind", "slack") for post in receiver.posts]
        print(f"receiver: {kinds.count('evaluation')} failed-run webhooks, {kinds.count('slack')} Slack alert(s)")
        slack = next(post for post in receiver.posts if "blocks" in post)
        print(f"slack:    {slack['text']}")
        print(f"webhook:  {webhook.stats()}")

        # A receiver that is down: the run does not wait for it; deliveries retry in the background.
        dead = WebhookNotifier(f"http://127.0.0.1:{free_port()}/hook", retries=2, backoff=0.05)
        down = AgentAsJudgeEval(name="helpful-dead-hook", criteria="The answer is correct.", on_fail=dead,
                                **connection)
        started = time.perf_counter()
        helpdesk(down).run("one more [[fail]]")
        print(f"dead receiver: run took {(time.perf_counter() - started) * 1000:.0f} ms (judge included)")
        judgehooks.drain(timeout=10)
        print(f"dead receiver: {dead.stats()}")


if __name__ == "__main__":
    main()
