"""`judgehooks.ui.app(store)`: the `judgehooks ui` pages as an ASGI app, to serve or to mount
(``fastapi_app.mount("/evals", judgehooks.ui.app(store))``). Needs the ``ui`` extra."""

from ._ui import app

__all__ = ("app",)
