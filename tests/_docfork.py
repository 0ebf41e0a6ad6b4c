"""A warm interpreter that runs docs blocks, each group in a fresh process forked from it.

Importing agno and litellm takes 5-8 s; a docs block runs in a fraction of that. So one process
per pytest worker imports them once (while it still has a single thread) and then, for each
request on stdin, forks a child that starts a session of its own (so the test can kill it with its
whole group), moves to the request's directory, runs the blocks with ``__name__ == "__main__"``
and exits the way a script does: threads are joined, atexit hooks (judgehooks' exit drain) run.

Protocol, one JSON object per line: a request ``{"cwd", "out", "env", "blocks": [{"path", "line",
"code"}]}`` gets ``{"pid"}`` at once and ``{"pid", "status"}`` when the child has ended.

A request may also carry ``"hide"`` (module prefix -> the distribution that provides it, or null
for one the reader installed) and ``"installs"`` (what the reader installed, in words): the child
then refuses to import a module of a distribution the reader did not install, as their environment
would (tests/_installs.py), though this interpreter has every extra. (What the warm-up imported
stays importable: agno, litellm, judgehooks and what they load, all installed by the README.)

Tracebacks name the markdown file and its line: each block is compiled under its page's path,
its code starting on the line of the page where it stands.
"""

from __future__ import annotations

import atexit
import gc
import importlib.abc
import json
import linecache
import os
import sys
import threading
import traceback
import types


def _warm() -> None:
    import agno.agent  # noqa: F401
    import agno.models.openai  # noqa: F401
    import agno.team  # noqa: F401

    import judgehooks  # noqa: F401
    import judgehooks.stores  # noqa: F401
    import judgehooks.testing  # noqa: F401
    from judgehooks._judges.litellm import load_litellm

    load_litellm()
    for name in judgehooks.__all__:  # the lazily imported parts of the public face too
        try:
            getattr(judgehooks, name)
        except ImportError:  # an optional extra that is not installed: a block that needs it says so
            pass
    gc.collect()
    gc.freeze()  # the children's collections then walk only what their blocks make
    # a fork copies only the forking thread: anything a warm-up started would be half-present
    assert threading.active_count() == 1, [t.name for t in threading.enumerate()]


class _NotInstalled(importlib.abc.MetaPathFinder):
    """Refuses the modules of distributions the reader did not install (see the module docstring)."""

    def __init__(self, owners: dict[str, str | None], installs: str) -> None:
        self.owners, self.installs = owners, installs

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        parts = fullname.split(".")
        for end in range(len(parts), 0, -1):
            prefix = ".".join(parts[:end])
            if prefix in self.owners:
                owner = self.owners[prefix]
                if owner is not None:
                    raise ModuleNotFoundError(f"No module named {fullname!r}: {owner} is not installed by "
                                              f"{self.installs}", name=fullname)
                return None
        return None


def _child(request: dict) -> None:
    """Runs in the forked child; ends the process (SystemExit travels up to the interpreter)."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    for key, value in request["env"].items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if request.get("hide"):
        sys.meta_path.insert(0, _NotInstalled(request["hide"], request["installs"]))
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # as for `python script.py` in that folder: its own modules import
    sys.argv = ["docs-block"]
    # a module of its own, as a script's: classes defined in a block say __module__ == "__main__",
    # and inspect.getsource finds their text in the page (the lines match)
    main = types.ModuleType("__main__")
    main.__file__ = request["blocks"][0]["path"]
    sys.modules["__main__"] = main
    # What inspect and tracebacks read as the page: its blocks at their own lines, blank lines
    # between, so the page "file" parses as Python (inspect.getsource parses a class's whole file).
    pages: dict[str, list[str]] = {}
    for block in request["blocks"]:
        lines = pages.setdefault(block["path"], [])
        body = block["code"].splitlines(keepends=True)
        lines.extend(["\n"] * (block["line"] - len(lines)))
        lines[block["line"]:block["line"] + len(body)] = body
    for path, lines in pages.items():
        linecache.cache[path] = (sum(map(len, lines)), None, lines, path)  # mtime None: never re-read
    for block in request["blocks"]:
        code = "\n" * block["line"] + block["code"]  # the body starts on the line after the fence
        try:
            exec(compile(code, block["path"], "exec"), main.__dict__)  # noqa: S102 - the point of the test
        except SystemExit as exc:
            _exit(0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1)
        except BaseException:
            traceback.print_exc()
            print(f"docs block {block['path']}:{block['line']} raised", file=sys.stderr, flush=True)
            _exit(1)
    _exit(0)


def _exit(status: int) -> None:
    """End as a script ends: wait for its non-daemon threads, run the atexit hooks (judgehooks'
    exit drain), flush; then skip tearing down the heap that agno and litellm built, which takes
    seconds and changes nothing a block could show."""
    try:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
        status = status or 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _serve() -> None:
    reply = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        reply.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        reply.write(json.dumps({"pid": pid}) + "\n")
        reply.flush()
        _, status = os.waitpid(pid, 0)
        reply.write(json.dumps({"pid": pid, "status": os.waitstatus_to_exitcode(status)}) + "\n")
        reply.flush()


if __name__ == "__main__":
    _warm()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    _serve()
