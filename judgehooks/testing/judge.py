"""`FakeJudge`: an in-process judge for tests, as httpx ships `MockTransport`: no HTTP, no model."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from .._judges.base import BaseJudge, JudgeReply
from .._judges.prompt import JudgeRequest

if TYPE_CHECKING:  # annotations only: typing.TypeIs is Python 3.13+
    from typing_extensions import TypeIs

#: what a handler may return: the judge's raw reply text, or a whole reply
Reply = str | JudgeReply
Handler = Callable[[JudgeRequest], Reply | Awaitable[Reply]]


class FakeJudge(BaseJudge):
    """A judge whose replies come from a function of the request, or from a script.

    ``FakeJudge(handler)``: ``handler(request)``, sync or async, returns the reply text (e.g.
    ``'{"passed": true, "reason": "ok"}'``) or a `JudgeReply`; raising simulates a judge error
    (an ``openai.RateLimitError`` is retried like the real one). ``FakeJudge("reply1", "reply2",
    TimeoutError("slow"), ...)``: canned replies, texts or exceptions to raise, used in order; the
    last one repeats. ``requests`` holds every `JudgeRequest` seen, ``calls`` counts them.
    """

    def __init__(self, *replies: str | BaseException | type[BaseException] | Handler,
                 model: str = "fake/judge") -> None:
        if not replies:
            raise ValueError("FakeJudge needs a handler (a function of the request) or at least one reply")
        handlers = [r for r in replies if callable(r) and not _is_exception(r)]
        if handlers and len(replies) > 1:
            raise ValueError("FakeJudge takes one handler, or canned replies (texts or exceptions), not both")
        for reply in replies:
            if not (handlers or isinstance(reply, str) or _is_exception(reply)):
                raise TypeError(f"FakeJudge replies are texts, exceptions or one handler, got {type(reply).__name__}")
        self.model = model
        self.requests: list[JudgeRequest] = []
        canned = [r for r in replies if isinstance(r, str) or _is_exception(r)]  # all of them, when no handler
        self._handler: Handler = handlers[0] if handlers else _script(canned)

    @property
    def calls(self) -> int:
        """How many times the judge was asked."""
        return len(self.requests)

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        self.requests.append(request)
        reply = self._handler(request)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, JudgeReply):
            return reply
        if isinstance(reply, str):
            return JudgeReply(text=reply, model=self.model, prompt_tokens=1, completion_tokens=1, cost_usd=None)
        raise TypeError(f"FakeJudge handler must return the reply text or a JudgeReply, got {type(reply).__name__}")

    def __repr__(self) -> str:
        return f"FakeJudge(model={self.model!r}, calls={self.calls})"


def _is_exception(value: object) -> TypeIs[BaseException | type[BaseException]]:
    return isinstance(value, BaseException) or (isinstance(value, type) and issubclass(value, BaseException))


def _script(replies: list[str | BaseException | type[BaseException]]) -> Handler:
    """The canned replies as a handler: in order, the last one repeating."""
    position = 0

    def next_reply(request: JudgeRequest) -> str:
        nonlocal position
        reply = replies[min(position, len(replies) - 1)]
        position += 1
        if _is_exception(reply):
            raise reply
        return reply

    return next_reply
