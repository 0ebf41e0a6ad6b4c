"""The web app over a store: `judgehooks ui` serves it, `judgehooks.ui.app(store)` mounts it in a
FastAPI app or agno's AgentOS. Starlette routes, Jinja2 templates with autoescape, charts drawn on
the server as SVG, and one small script file for the review keys; nothing is loaded from the internet."""

from .app import app

__all__ = ("app",)
