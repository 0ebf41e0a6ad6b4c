"""`StubLLMServer`: a scripted OpenAI-compatible server on 127.0.0.1, for tests, examples and benchmarks.

`StubLLMServer` speaks enough of the OpenAI chat-completions protocol for agno's `OpenAILike`
models and for litellm, over real HTTP on 127.0.0.1. It plays two roles, told apart per request:

* the **judge** (any request with a ``response_format``, or whose model name starts with
  ``judge``): replies with a verdict;
* the **agent** (anything else): echoes the last user message as ``ECHO: ...``, optionally after a
  tool call, with or without streaming. A model named ``schema-agent...`` is the agent also when
  it asks for structured output (an agno ``output_schema``): answer it with ``[[raw]]{...}``.

Behaviour is steered per run by directives inside the text it reads, so concurrent runs stay
independent: ``[[score=3]]`` (numeric verdict), ``[[fail]]`` (binary fail), ``[[judge_status=500]]``,
``[[judge_malformed]]``, ``[[judge_body=%7B%7D]]`` (a 200 reply with that body, percent-encoded: no
chat completion at all), ``[[judge_delay=200]]`` (ms), ``[[reason=%1B%5D0%3Bx%07]]`` (the judge's
reason, percent-encoded so it may hold any character), ``[[reason_chars=N]]`` (the reason padded to
N characters), ``[[judge_quote=plain|blockquote|code|fence|inline]]`` (a plain-text reply quotes the answer before
the judge's own verdict: see `_quoting`), ``[[tool=name]]`` (the agent calls that tool
once; each string parameter gets the first 40 characters of the question unless
``[[arg_<parameter>=value]]`` gives it), ``[[fail_first=N]]`` (the first N judge calls that read this
same directive fail, later ones pass: a repaired answer passes; ``[[fail_first=1:tag]]`` keeps
separate counts per tag; :meth:`StubLLMServer.reset` clears them).
For evaluators that ask more than once: ``[[scores=7,9,9]]`` gives the n-th judge call that
carries it (per model) the n-th score, cycling. For tool trajectories: ``[[tools=a,b]]`` makes each
agent call, one per turn, those of the listed tools it was offered (string arguments get the
message; ``member_id`` gets ``[[member=ID]]``, so a team leader can delegate and the member then
calls its own tools); ``[[cost=0.002]]`` adds that cost to the agent's reported usage; ``[[raw]]``
makes the agent answer with the message itself, directives removed (e.g. a JSON document);
``[[answer=text]]`` in the agent's instructions (its system message) makes it answer ``text``.
A failure-naming prompt (reasons fenced as ``REASON-1``...) gets ``Stub: `` and the first reason's
first three words, or ``[[name=...]]`` (percent-encoded) when a reason holds it.
A pairwise judge prompt (a `judgehooks.Shadow`'s: answers fenced as ``ANSWER-A`` and ``ANSWER-B``)
gets the longer answer as the winner, ``tie`` when they are as long, with the prompt's nonce.
A judge offered a ``final_result...`` tool (pydantic-ai's output tool, as pydantic-evals' `LLMJudge`
asks) answers by calling it with ``reason``, ``pass`` and ``score``.
``[[judge_tokens=N]]`` makes the judge report N prompt tokens (past 10**9 the judge's reply keeps none),
``[[run_tokens=N]]`` the agent (e.g. more than a store's column holds);
``[[judge_cached_tokens=N]]`` reports N of them as read from the provider's prompt cache.
Hostile wires: ``[[judge_echo_auth=400]]`` replies that status with an error body that echoes the
request's ``Authorization`` header (as some gateways do); ``[[judge_redirect=URL]]`` (percent-encoded)
answers ``307`` to that URL; ``[[judge_reply_bytes=N]]`` gives a verdict padded to an N-byte body,
written in 64 KiB pieces (``counts["judge_bytes_sent"]`` says how many bytes the client took before it
hung up). ``counts["judge_redirected"]`` counts requests that got a redirect.
``[[judge_runaway]]`` makes the judge repeat its reason until the request's token cap (``max_tokens`` or
``max_completion_tokens``; without one, 8,192 tokens: its context) and stop there, mid-verdict, with
finish_reason ``"length"``, as a small model sometimes does; ``[[judge_runaway=until_told]]`` does so
unless the request's last message says to reply with "the JSON object only".
``[[half_emoji]]`` ends its answer with a lone UTF-16 surrogate (``"\\ud83d"`` in the JSON body).
A ``handler`` (`StubSettings.handler`, set with ``configure(handler=fn)``) answers any request
itself: ``fn(request_body) -> str | None`` (None: the behaviour above; ``[[cost=...]]`` still applies).
When several directives of one name appear, the last wins. Process-wide behaviour (latency, an
outage for the next N judge calls, a server that refuses structured output) is set with
:meth:`StubLLMServer.configure`.

Run it as a separate process for benchmarks: ``python -m judgehooks.testing --port 0``.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

_DIRECTIVE = re.compile(r"\[\[(\w+)(?:=([^\]]*))?\]\]")


@dataclass
class StubSettings:
    """Process-wide behaviour of the stub server; per-request directives override it."""
    judge_delay_ms: float = 0.0
    agent_delay_ms: float = 0.0
    judge_fail_next: int = 0  # the next N judge calls fail with judge_fail_status
    judge_fail_status: int = 500
    judge_structured: bool = True  # False: 400 on response_format, answers in SCORE:/PASSED: lines
    retry_after_s: float | None = None
    # A provider's rate limit: beyond judge_limit judge calls in one fixed window of judge_limit_window_s
    # seconds, reply 429 (counted as judge_limited). judge_windows counts the calls of each window.
    judge_limit: int | None = None
    judge_limit_window_s: float = 60.0
    judge_windows: dict[int, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"judge": 0, "agent": 0, "judge_errors": 0,
                                                            "judge_limited": 0, "judge_redirected": 0,
                                                            "judge_bytes_sent": 0})
    sequences: dict[str, int] = field(default_factory=dict)  # [[scores=...]] calls seen, per model and list
    fail_first_seen: dict[str, int] = field(default_factory=dict)  # judge calls per [[fail_first=...]] value
    judge_prompts: list[str] = field(default_factory=list)  # the last 100 judge requests' text, oldest first
    judge_requests: list[dict[str, Any]] = field(default_factory=list)  # the last 100 judge request bodies
    judge_headers: list[dict[str, str]] = field(default_factory=list)  # their headers (names lowercased)
    judge_paths: list[str] = field(default_factory=list)  # their request targets, as sent (a proxy's: the URL)
    # A judge model's context window, in characters of the request's text: longer requests get
    # OpenAI's 400 context_length_exceeded (None: no limit).
    judge_context_chars: int | None = None
    # A function of each chat request (the JSON body, as a dict) that answers it: the text it returns
    # is the reply's content; None leaves the request to the behaviour above. Runs on the server's
    # thread, so it sees exactly what went over HTTP (e.g. models whose answers depend on their prompt).
    handler: Callable[[dict[str, Any]], str | None] | None = None


def _directives(text: str) -> dict[str, str]:
    return {m.group(1): (m.group(2) or "") for m in _DIRECTIVE.finditer(text)}


_PAIRWISE = re.compile(r"<<<ANSWER-A-([0-9a-f]+)>>>")
_NAMING = re.compile(r"<<<REASON-1-([0-9a-f]+)>>>")


def _fenced(text: str, label: str, nonce: str) -> str:
    """The text a judge prompt fenced as `label` with `nonce` ("" when absent)."""
    found = re.search(rf"<<<{label}-{nonce}>>>\n(.*?)\n<<<END-{label}-{nonce}>>>", text, re.DOTALL)
    return found.group(1) if found else ""


def _reason(d: dict[str, str], default: str) -> str:
    """The judge's reason: ``[[reason=...]]`` (percent-encoded, so it may hold any character),
    then padded with ``x`` to ``[[reason_chars=N]]`` characters."""
    reason = unquote(d["reason"]) if "reason" in d else default
    size = int(d.get("reason_chars") or 0)
    return reason + "x" * (size - len(reason)) if size > len(reason) else reason


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def _usage(prompt: str, completion: str) -> dict[str, int]:
    p, c = max(1, len(prompt) // 4), max(1, len(completion) // 4)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _completion(model: str, message: dict[str, Any], usage: dict[str, int], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


_OUTPUT_FENCE = re.compile(r"<<<OUTPUT-([0-9a-f]+)>>>\n(.*?)\n<<<END-OUTPUT-\1>>>", re.DOTALL)


def _quoting(messages: list[dict[str, Any]], d: dict[str, str], verdict: str) -> str:
    """A judge that quotes the answer it grades before its own verdict (`[[judge_quote=style]]`),
    repeating the nonce with its verdict unless `[[judge_nonce=no]]` (`[[judge_nonce=before]]`: on a
    line of its own before the verdict); `[[judge_own=json]]` gives its verdict as a JSON object."""
    found = _OUTPUT_FENCE.search("\n".join(_text_of(m) for m in messages))
    nonce, answer = (found.group(1), found.group(2)) if found else ("", "")
    lines = answer.splitlines() or [""]
    quoted = {
        "plain": f"The answer says:\n{answer}",
        "blockquote": "The answer says:\n" + "\n".join(f"> {line}" for line in lines),
        "code": f"The answer says:\n```\n{answer}\n```",
        "fence": f"<<<OUTPUT-{nonce}>>>\n{answer}\n<<<END-OUTPUT-{nonce}>>>",
        "inline": "The answer says:\n" + "\n".join(f'"{line}"' for line in lines),
    }[d["judge_quote"] or "plain"]
    signs = d.get("judge_nonce") != "no"
    if d.get("judge_own") == "json":
        own = json.loads(verdict) if verdict.startswith("{") else {}
        if not own:
            label, value = verdict.rsplit("\n", 1)[-1].split(": ", 1)
            own = {label.lower(): int(value) if value.isdigit() else value == "true", "reason": "my own verdict"}
        own = json.dumps({**own, **({"nonce": nonce} if signs else {})})
    elif d.get("judge_nonce") == "before":
        own = f"NONCE: {nonce}\n{verdict}"
    else:
        own = verdict + (f"\nNONCE: {nonce}" if signs else "")
    return f"{quoted}\n\nMy own assessment follows.\n{own}"


class _Reply:
    def __init__(self, status: int, body: Any = None, *, stream: list[dict[str, Any]] | None = None,
                 raw: bytes | None = None, headers: dict[str, str] | None = None) -> None:
        self.status, self.body, self.stream, self.raw, self.headers = status, body, stream, raw, headers or {}


class _StubApp:
    """The protocol logic, free of sockets so it is easy to read."""
    def __init__(self, settings: StubSettings) -> None:
        self.settings = settings

    async def handle(self, method: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> _Reply:
        if method == "GET" and path.endswith("/_stats"):
            return _Reply(200, dict(self.settings.counts))
        if method == "POST" and path.endswith("/_control"):
            for key, value in json.loads(body or b"{}").items():
                setattr(self.settings, key, value)
            return _Reply(200, {"ok": True})
        if method == "GET" and path.endswith("/models"):
            return _Reply(200, {"object": "list", "data": [{"id": "agent", "object": "model"}]})
        if method != "POST" or not path.endswith("/chat/completions"):
            return _Reply(404, {"error": {"message": f"no route {method} {path}"}})
        request = json.loads(body)
        model = str(request.get("model", ""))
        if self.settings.handler is not None:
            answer = self.settings.handler(request)
            if answer is not None:
                prompt = "\n".join(_text_of(m) for m in request.get("messages", []))
                usage: dict[str, Any] = _usage(prompt, answer)
                cost = _directives(prompt).get("cost")
                if cost:  # [[cost=0.002]] in the request: that cost in the reported usage, as for the agent
                    usage["cost"] = float(cost)
                if request.get("stream"):
                    return _Reply(200, stream=self._chunks(model, answer, None, usage))
                return _Reply(200, _completion(model, {"role": "assistant", "content": answer}, usage))
        is_judge = model.startswith("judge") or ("response_format" in request and not model.startswith("schema-agent"))
        if is_judge:
            self.settings.judge_paths[:] = [*self.settings.judge_paths[-99:], path]
        return await (self._judge(request, headers or {}) if is_judge else self._agent(request))

    async def _judge(self, request: dict[str, Any], request_headers: dict[str, str]) -> _Reply:
        s = self.settings
        s.counts["judge"] += 1
        if s.judge_limit is not None:
            window = int(time.monotonic() // s.judge_limit_window_s)
            s.judge_windows[window] = s.judge_windows.get(window, 0) + 1
            if s.judge_windows[window] > s.judge_limit:
                s.counts["judge_limited"] += 1
                return _Reply(429, {"error": {"message": "stub rate limit reached", "type": "rate_limit_error"}})
        messages = request.get("messages", [])
        text = "\n".join(_text_of(m) for m in messages)
        s.judge_prompts[:] = [*s.judge_prompts[-99:], text]
        s.judge_requests[:] = [*s.judge_requests[-99:], request]
        s.judge_headers[:] = [*s.judge_headers[-99:], dict(request_headers)]
        d = _directives(text)
        delay = float(d.get("judge_delay", s.judge_delay_ms) or 0)
        # An outage counts calls as they arrive: a call still sleeping from an earlier test (or
        # run) cannot use up an outage configured after it was sent.
        outage = s.judge_fail_next > 0
        if outage:
            s.judge_fail_next -= 1
        if delay:
            await asyncio.sleep(delay / 1000)
        headers = {"retry-after": str(s.retry_after_s)} if s.retry_after_s is not None else {}
        if outage:
            s.counts["judge_errors"] += 1
            return _Reply(s.judge_fail_status, {"error": {"message": "stub outage", "type": "server_error"}},
                          headers=headers)
        if "judge_redirect" in d:
            s.counts["judge_redirected"] += 1
            return _Reply(307, {"error": {"message": "moved"}}, headers={"location": unquote(d["judge_redirect"])})
        if "judge_echo_auth" in d:  # a gateway that quotes the request's headers in its error body
            s.counts["judge_errors"] += 1
            auth = request_headers.get("authorization", "")
            return _Reply(int(d["judge_echo_auth"] or 400), {"error": {
                "message": f"upstream refused the request; it carried Authorization: {auth}",
                "type": "invalid_request_error",
                "request_headers": {"Authorization": auth, "key": auth.removeprefix("Bearer ")}}})
        if "judge_body" in d:  # a reply that is no chat completion: the body as given, percent-encoded
            return _Reply(200, raw=unquote(d["judge_body"]).encode())
        if "judge_status" in d:
            s.counts["judge_errors"] += 1
            return _Reply(int(d["judge_status"]), {"error": {"message": "stub error", "type": "server_error"}},
                          headers=headers)
        if s.judge_context_chars is not None and len(text) > s.judge_context_chars:
            s.counts["judge_errors"] += 1
            limit = (f"This model's maximum context length is {s.judge_context_chars // 4} tokens. However, your "
                     f"messages resulted in {len(text) // 4} tokens. Please reduce the length of the messages.")
            return _Reply(400, {"error": {"message": limit, "type": "invalid_request_error",
                                          "code": "context_length_exceeded", "param": "messages"}})
        if "response_format" in request and not s.judge_structured:
            return _Reply(400, {"error": {"message": "response_format json_schema is not supported",
                                          "type": "invalid_request_error", "param": "response_format"}})
        schema = json.dumps(request.get("response_format") or {})
        system = _text_of(messages[0]) if messages else ""
        numeric = '"score"' in schema or ("response_format" not in request and "SCORE:" in system)
        if "fail_first" in d:
            key = d["fail_first"]
            s.fail_first_seen[key] = seen = s.fail_first_seen.get(key, 0) + 1
            if seen <= int(key.split(":")[0] or 1):
                d.setdefault("fail", "")
                d.setdefault("score", "1")
        pairwise = _PAIRWISE.search(text)
        naming = _NAMING.search(text)
        if "judge_malformed" in d:
            content = "I think it is fine {not json"
        elif pairwise is not None:  # a Shadow's comparison: the longer answer is better, equal ones tie
            a, b = (_fenced(text, label, pairwise.group(1)) for label in ("ANSWER-A", "ANSWER-B"))
            winner = "tie" if len(a) == len(b) else ("A" if len(a) > len(b) else "B")
            reason = _reason(d, f"stub judge prefers {winner}" if winner != "tie" else "stub judge sees a tie")
            content = (json.dumps({"winner": winner, "reason": reason, "nonce": pairwise.group(1)})
                       if "response_format" in request
                       else f"REASONING: {reason}\nWINNER: {winner}\nNONCE: {pairwise.group(1)}")
        elif naming is not None:  # a group of failures to name: its first reason's first words
            first = _fenced(text, "REASON-1", naming.group(1))
            name = unquote(d["name"]) if "name" in d else "Stub: " + " ".join(first.split()[:3])
            content = (json.dumps({"name": name}) if "response_format" in request
                       else f"NAME: {name}\nNONCE: {naming.group(1)}")
        elif numeric:
            score = int(d.get("score", "8") or 8)
            if d.get("scores"):
                options = [int(x) for x in d["scores"].split(",")]
                key = f"{request.get('model')}|{d['scores']}"
                seen = s.sequences[key] = s.sequences.get(key, 0) + 1
                score = options[(seen - 1) % len(options)]
            reason = _reason(d, f"stub judge gave {score}")
            content = (json.dumps({"score": score, "reason": reason}) if "response_format" in request
                       else f"REASONING: {reason}\nSCORE: {score}")
        else:
            passed = "fail" not in d
            reason = _reason(d, "stub judge says " + ("pass" if passed else "fail"))
            content = (json.dumps({"passed": passed, "reason": reason}) if "response_format" in request
                       else f"Sure. REASONING: {reason}\nPASSED: {'true' if passed else 'false'}")
        if "judge_quote" in d and "response_format" not in request:
            content = _quoting(messages, d, content)
        finish = "stop"
        if "judge_runaway" in d and not (d["judge_runaway"] == "until_told" and messages
                                         and "JSON object only" in _text_of(messages[-1])):
            cap = int(request.get("max_completion_tokens") or request.get("max_tokens") or 8192)
            marker = '"reason": "' if content.startswith("{") else "REASONING: "
            content = (content[:content.find(marker) + len(marker)] + "the answer restates the question and " * cap)
            content = content[:cap * 4]
            finish = "length"
        message: dict[str, Any] = {"role": "assistant", "content": content}
        output_tool = next((t["function"] for t in request.get("tools") or ()
                            if str((t.get("function") or {}).get("name", "")).startswith("final_result")), None)
        if output_tool is not None:  # a judge asked to answer through an output tool (pydantic-ai's judges)
            verdict = json.loads(content) if content.startswith("{") else {}
            passed = verdict.get("passed", "fail" not in d)
            args = {"reason": verdict.get("reason", "stub"), "pass": passed,
                    "score": float(verdict.get("score", 1.0 if passed else 0.0))}
            params = (output_tool.get("parameters") or {}).get("properties") or {}
            call = {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                    "function": {"name": output_tool["name"], "arguments": json.dumps(
                        {k: v for k, v in args.items() if k in params} or args)}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        usage: dict[str, Any] = _usage(text, content)
        if d.get("judge_tokens"):
            usage["prompt_tokens"] = int(d["judge_tokens"])
        if d.get("judge_cached_tokens"):  # OpenAI's prompt caching: part of the prompt read from the cache
            usage["prompt_tokens_details"] = {"cached_tokens": int(d["judge_cached_tokens"])}
        finish = "tool_calls" if output_tool is not None else finish
        reply = _completion(request.get("model", "judge"), message, usage, finish)
        if d.get("judge_reply_bytes"):  # a huge reply: the verdict, then padding to N bytes
            raw = json.dumps(reply).encode()
            padding = b"x" * max(0, int(d["judge_reply_bytes"]) - len(raw) - 16)
            return _Reply(200, raw=raw[:-1] + b', "padding": "' + padding + b'"}')
        return _Reply(200, reply)

    async def _agent(self, request: dict[str, Any]) -> _Reply:
        s = self.settings
        s.counts["agent"] += 1
        messages = request.get("messages", [])
        users = [m for m in messages if m.get("role") == "user"]
        last_user = _text_of(users[-1]) if users else ""
        d = _directives(last_user)
        delay = float(d.get("agent_delay", s.agent_delay_ms) or 0)
        if delay:
            await asyncio.sleep(delay / 1000)
        tool_results = [_text_of(m) for m in messages if m.get("role") == "tool"]
        prompt = "\n".join(_text_of(m) for m in messages)
        model = request.get("model", "agent")
        call = None
        if "tool" in d and not tool_results and request.get("tools"):
            call = {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                    "function": {"name": d["tool"], "arguments": json.dumps(self._tool_args(request, d, last_user))}}
        elif d.get("tools") and request.get("tools"):
            call = self._planned_call(d, request["tools"], len(tool_results), last_user)
        if call is not None:
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            if request.get("stream"):
                return _Reply(200, stream=self._chunks(model, None, [call], _usage(prompt, "call")))
            return _Reply(200, _completion(model, message, _usage(prompt, "call"), "tool_calls"))
        system = "\n".join(_text_of(m) for m in messages if m.get("role") in ("system", "developer"))
        scripted = _directives(system).get("answer")
        if scripted is not None:
            content = scripted
        elif "raw" in d:
            content = _DIRECTIVE.sub("", last_user).strip()
        else:
            content = f"ECHO: {last_user}" + (f" TOOL_RESULT: {tool_results[-1]}" if tool_results else "")
        if "half_emoji" in d:  # a model that cut an emoji in half: JSON "\ud83d", a lone surrogate once decoded
            content += " \ud83d"
        usage: dict[str, Any] = _usage(prompt, content)
        if d.get("cost"):
            usage["cost"] = float(d["cost"])
        if d.get("run_tokens"):
            usage["prompt_tokens"] = int(d["run_tokens"])
        if request.get("stream"):
            return _Reply(200, stream=self._chunks(model, content, None, usage))
        return _Reply(200, _completion(model, {"role": "assistant", "content": content}, usage))

    @staticmethod
    def _planned_call(d: dict[str, str], tools: list[dict[str, Any]], done: int, text: str) -> dict[str, Any] | None:
        """The next call of a ``[[tools=a,b]]`` plan among the tools this request offers, if any is left."""
        offered = {t["function"]["name"]: t["function"] for t in tools if t.get("type") == "function"}
        plan = [name for name in d["tools"].split(",") if name in offered]
        if done >= len(plan):
            return None
        params = (offered[plan[done]].get("parameters") or {}).get("properties") or {}
        args = {name: (d.get("member", "") if name == "member_id" else text) for name in params}
        return {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                "function": {"name": plan[done], "arguments": json.dumps(args)}}

    @staticmethod
    def _tool_args(request: dict[str, Any], d: dict[str, str], last_user: str) -> dict[str, Any]:
        """Arguments for the directed tool: `[[arg_x=...]]` values, else the question's start."""
        for tool in request.get("tools") or ():
            function = tool.get("function") or {}
            if function.get("name") == d["tool"]:
                names = list((function.get("parameters") or {}).get("properties") or {}) or ["text"]
                return {name: d.get(f"arg_{name}", last_user[:40]) for name in names}
        return {"text": last_user[:40]}

    @staticmethod
    def _chunks(model: str, content: str | None, tool_calls: list[dict[str, Any]] | None,
                usage: dict[str, int]) -> list[dict[str, Any]]:
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}
        chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
        if tool_calls:
            deltas = [{"index": i, **c} for i, c in enumerate(tool_calls)]
            chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": deltas}}]})
            finish = "tool_calls"
        else:
            words = (content or "").split(" ")
            for i, word in enumerate(words):
                piece = word if i == 0 else " " + word
                chunks.append({**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
            finish = "stop"
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        chunks.append({**base, "choices": [], "usage": usage})
        return chunks


_REASONS = {200: "OK", 307: "Temporary Redirect", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 503: "Service Unavailable"}


class StubLLMServer:
    """An OpenAI-compatible HTTP server on 127.0.0.1, run on its own thread and event loop.

    Use as a context manager, or call :meth:`start` / :meth:`stop`. ``base_url`` ends in ``/v1``.
    """

    def __init__(self, port: int = 0, settings: StubSettings | None = None) -> None:
        self.settings = settings or StubSettings()
        self._app = _StubApp(self.settings)
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def configure(self, **changes: Any) -> None:
        """Change process-wide behaviour, e.g. ``configure(judge_delay_ms=200, judge_fail_next=3)``."""
        for key, value in changes.items():
            if not hasattr(self.settings, key):
                raise AttributeError(f"StubSettings has no setting {key!r}")
            setattr(self.settings, key, value)

    def reset(self) -> None:
        """Back to defaults, counters at zero."""
        fresh = StubSettings()
        for key in fresh.__dataclass_fields__:
            setattr(self.settings, key, getattr(fresh, key))

    def start(self) -> StubLLMServer:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._connection, "127.0.0.1", self._port, backlog=1024))
            ready.set()
            self._loop.run_forever()
            self._server.close()
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            if tasks:
                self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self._loop.close()

        self._thread = threading.Thread(target=serve, name="judgehooks-stub-llm", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("stub LLM server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def __enter__(self) -> StubLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in
                           (line.split(":", 1) for line in lines[1:] if ":" in line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                reply = await self._app.handle(method, path, body, headers)
                if reply.stream is not None:
                    await self._write_stream(writer, reply.stream)
                    return
                payload = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
                writer.write(
                    f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"
                    f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n{extra}\r\n".encode())
                for at in range(0, len(payload), 65536):  # pieces: a client that hangs up stops the sending
                    writer.write(payload[at:at + 65536])
                    await writer.drain()
                    self.settings.counts["judge_bytes_sent"] += min(65536, len(payload) - at)
                if not payload:
                    await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _write_stream(writer: asyncio.StreamWriter, chunks: list[dict[str, Any]]) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                     b"connection: close\r\n\r\n")
        for chunk in chunks:
            writer.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()


def _main() -> None:  # pragma: no cover - exercised by the benchmarks
    import argparse

    parser = argparse.ArgumentParser(description="judgehooks stub OpenAI-compatible server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--judge-delay-ms", type=float, default=0.0)
    args = parser.parse_args()
    server = StubLLMServer(args.port, StubSettings(judge_delay_ms=args.judge_delay_ms)).start()
    print(server.port, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
