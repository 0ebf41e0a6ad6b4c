"""`--import MODULE` under every command that takes it: a module in the user's own project folder
imports as it would with `python -m`, and a bad module is one line naming it, never a traceback.

The console script's `sys.path` starts with its own bin folder, not the working directory; each test
takes the working directory (and the tests' own folders) off `sys.path` to run as it does."""

from __future__ import annotations

import os
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from _runner import run_cli

from judgehooks import Contains, SQLiteStore


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder like a user's, the command's working directory, not on sys.path; a package
    name of its own per test (a module imported once stays imported in this process)."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", os.getcwd(), str(tmp_path))])
    package = f"myapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    yield tmp_path, package
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]


def write(folder: Path, package: str, source: str) -> str:
    (folder / package / "evals.py").write_text(textwrap.dedent(source))
    return f"{package}.evals"


def test_worker_imports_a_module_from_the_working_directory(project):
    folder, package = project
    module = write(folder, package, """
        from judgehooks import Contains
        has_hello = Contains("hello", name="has-hello")
    """)
    done = run_cli("worker", "--broker", "redis://127.0.0.1:1/0", "--store", str(folder / "evals.db"),
                   "--import", module, cwd=folder)
    # past the import: the next thing that can fail is the (closed) Redis port
    assert "--import" not in done.stderr, done.stderr
    assert done.returncode == 1 and "cannot reach Redis" in done.stderr


def test_resume_imports_a_module_from_the_working_directory(project):
    folder, package = project
    module = write(folder, package, """
        import pathlib
        pathlib.Path("imported.txt").write_text("yes")
    """)
    done = run_cli("resume", "--store", str(folder / "evals.db"), "--import", module, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert (folder / "imported.txt").read_text() == "yes"


def test_consistency_imports_a_module_from_the_working_directory(project):
    folder, package = project
    store = SQLiteStore(folder / "evals.db")
    Contains("hello", name="has-hello", store=store).run(cases=[{"input": "q", "output": "hello there"},
                                                                 {"input": "q", "output": "bye"}])
    store.close()
    module = write(folder, package, """
        from judgehooks import Contains
        has_hello = Contains("hello", name="has-hello", store="evals.db")
    """)
    done = run_cli("consistency", "--store", str(folder / "evals.db"), "--evaluator", "has-hello",
                   "--import", module, "--sample", "2", "--repeats", "2", "--json", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert '"flip_rate": 0.0' in done.stdout


def test_grade_imports_an_evaluator_from_the_working_directory(project, server):
    folder, package = project
    module = write(folder, package, f"""
        from judgehooks import AgentAsJudgeEval
        helpful = AgentAsJudgeEval(criteria="helpful", model="openai/judge", api_base={server.base_url!r},
                                   api_key="k", store="evals.db", timeout=60)
    """)
    (folder / "cases.jsonl").write_text('{"input": "q", "output": "a"}\n')
    done = run_cli("grade", "cases.jsonl", "--evaluator", f"{module}:helpful", "--json", cwd=folder)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("command", [
    ("worker", "--broker", "redis://127.0.0.1:1/0", "--store", "evals.db"),
    ("resume", "--store", "evals.db"),
    ("consistency", "--evaluator", "x", "--store", "evals.db"),
    ("grade", "cases.jsonl", "--evaluator"),
])
@pytest.mark.parametrize("source, says", [
    (None, "No module named"),
    ("raise RuntimeError('settings missing')\n", "RuntimeError: settings missing (raised while importing it)"),
    ("def broken(:\n", "SyntaxError"),
])
def test_a_bad_module_is_one_line_naming_it(project, command, source, says):
    folder, package = project
    module = f"{package}.evals" if source is None else write(folder, package, source)
    store = SQLiteStore(folder / "evals.db")
    store.query_sync(limit=1)  # the file exists: consistency reads only a store that does
    store.close()
    (folder / "cases.jsonl").write_text('{"input": "q", "output": "a"}\n')
    name, *rest = command
    spec = [f"{module}:helpful"] if name == "grade" else ["--import", module]
    done = run_cli(name, *rest, *spec, cwd=folder)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"judgehooks: {name}: ") and module in lines[0] and says in lines[0]


def test_a_path_instead_of_a_module_name_says_which_name_to_give(project):
    folder, _ = project
    done = run_cli("resume", "--store", str(folder / "evals.db"), "--import", "myapp/evals.py", cwd=folder)
    assert done.returncode == 2
    assert done.stderr.strip() == ("judgehooks: resume: --import 'myapp/evals.py': not a module name "
                                   "(a dotted module name, e.g. myapp.evals)")
