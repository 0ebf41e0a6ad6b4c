"""``python -m judgehooks.testing --port 0``: the stub LLM server as a process (prints its port)."""

from .llm_server import _main

_main()
