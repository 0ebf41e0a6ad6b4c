"""Test doubles that ship with the package, as httpx ships `MockTransport` and structlog `capture_logs`.

* `FakeJudge`: a judge whose replies come from a function of the request (or a script), no HTTP;
* `capture_records`: every record judgehooks delivers while a block runs, whatever the store;
* `StubLLMServer` (with `StubSettings`): a scripted OpenAI-compatible server on 127.0.0.1, for real
  litellm and real agno agents (``python -m judgehooks.testing --port 0`` runs it as a process);
* `WebhookReceiver` and `RedisServer`: throwaway loopback servers for notifiers and distributed grading.
"""

from .judge import FakeJudge
from .llm_server import StubLLMServer, StubSettings
from .records import capture_records
from .servers import RedisServer, WebhookReceiver

__all__ = ("FakeJudge", "RedisServer", "StubLLMServer", "StubSettings", "WebhookReceiver", "capture_records")
