"""The architecture, as a test: every import of every judgehooks module (function-local ones
included) is read with `ast` and held to the rules of the layout.

Folders, top to bottom; a folder imports only from folders below it:

    judgehooks/__init__.py   the public face
    testing/                 test doubles that ship
    local.py                 the local model server helper
    _cli/                    the `judgehooks` command (nothing imports it)
    _optimize/               optimize and align_judge: drive agents and evaluators from above
    _evaluators/             WHAT grades
    _hooks/                  the agno seam
    _alerts/                 consumers of records
    _grading/                HOW a context becomes a stored record (pipeline, dispatcher, outbox, redis)
    stores/                  where records go
    _judges/                 the model that grades (the only folder that imports litellm)
    _runtime/                the loop, drain, exit and fork
    _base/                   frozen values and tiny helpers
    exceptions.py            every exception
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "judgehooks"

#: layer of each top-level part of the package; an import must point to a lower layer or its own folder
LAYERS = {
    "judgehooks": 14,  # the package face
    "testing": 13,
    "local": 12,
    "ui": 13,  # judgehooks.ui: the web app's public face (the `ui` extra)
    "_cli": 11,
    "_ui": 10.5,  # the web app: reads stores and writes labels; only _cli and the face import it
    "_optimize": 10,  # optimize / align_judge: above the evaluators they drive
    "_evaluators": 9,
    "_hooks": 8,
    "_alerts": 7,
    "_grading": 6,
    "stores": 5,
    "_judges": 4,
    "_runtime": 3,
    "_base": 2,
    "redact": 2,  # public redactors (judgehooks.redact): plain functions of text, imported by the snapshot
    "exceptions": 1,
}

#: where agno may be imported (everything else reads agno objects by duck typing)
AGNO_ALLOWED = ("_hooks", "_judges.agno", "_evaluators.base", "_evaluators.scorer", "stores._agno", "local",
                "testing")
#: optional extras: the only imports allowed inside functions (besides these, everything is at the top)
OPTIONAL = ("psycopg", "psycopg_pool", "taskiq", "taskiq_redis", "redis", "jsonschema", "opentelemetry", "agno",
            "litellm", "rich", "structlog", "httpx", "anyio.from_thread", "fastapi", "uvicorn", "xllamacpp", "re2",
            "regex", "openai", "aiohttp",  # slow to import: loaded on first use (a Regex check, the fast judge client)
            "presidio_analyzer", "starlette", "jinja2", "judgehooks._ui",  # the `ui` extra
            "gepa",  # the `optimize` extra: optimize / align_judge
            # judgehooks' own modules that import the `redis` extra at their top
            "judgehooks._grading.redis.publish", "judgehooks._grading.redis.worker", "judgehooks._grading.redis.broker",
            "judgehooks._grading.redis.sessions", "judgehooks._grading.redis.sessionworker")


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, function-local) for every import in the module."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    local_lines = {n.lineno for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, node.lineno in local_lines) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from . import x` imports the module x when there is one
                sub = f"{target}.{alias.name}"
                found.append((sub if sub in MODULES else target, node.lineno, node.lineno in local_lines))
    return found


def _part(module: str) -> str:
    parts = module.split(".")
    return "judgehooks" if len(parts) == 1 else parts[1]


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        for target, _, _ in _imports(name, path):
            if target in MODULES and target != name:
                graph[name].add(target)
    return graph


def test_the_layout_folders_exist():
    for part in LAYERS:
        if part != "judgehooks":
            assert any(_part(m) == part for m in MODULES), f"judgehooks/{part} is missing"


def test_no_import_cycle_counting_function_local_imports():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            # a package's __init__ importing its own submodules is how packages work, not a cycle
            if node.startswith(nxt + "."):
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for module in sorted(MODULES):
        if module not in state and (cycle := visit(module)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def test_imports_point_down_the_layers():
    wrong = []
    for name, path in MODULES.items():
        for target, line, _ in _imports(name, path):
            if target not in MODULES or target == name or name.startswith(target + "."):
                continue
            src, dst = _part(name), _part(target)
            if src == dst:
                continue
            if LAYERS[dst] >= LAYERS[src]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target} ({src} -> {dst} points up)")
    assert not wrong, "\n".join(wrong)


def test_nothing_inside_imports_the_package_face_or_the_cli():
    wrong = []
    for name, path in MODULES.items():
        for target, line, _ in _imports(name, path):
            if target == "judgehooks" and name != "judgehooks":
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports the package face")
            if _part(target) == "_cli" and target in MODULES and _part(name) != "_cli":
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports the CLI ({target})")
    assert not wrong, "\n".join(wrong)


def test_base_imports_only_exceptions_and_runtime_only_base():
    for name, path in MODULES.items():
        own = {_part(t) for t, _, _ in _imports(name, path) if t in MODULES} - {_part(name)}
        if _part(name) == "_base":
            assert own <= {"exceptions"}, f"{name} imports {own}"
        if _part(name) == "_runtime":
            assert own <= {"_base", "exceptions"}, f"{name} imports {own}"


def test_only_judges_import_litellm_and_agno_only_where_allowed():
    wrong = []
    for name, path in MODULES.items():
        short = name.partition(".")[2]
        for target, line, _ in _imports(name, path):
            root = target.split(".")[0]
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            if root in ("litellm", "openai", "aiohttp") and _part(name) != "_judges":
                wrong.append(f"{where} imports {target}: only judgehooks/_judges talks to the model client")
            if root == "agno" and not short.startswith(AGNO_ALLOWED):
                wrong.append(f"{where} imports {target}: agno is imported only by {', '.join(AGNO_ALLOWED)}")
    assert not wrong, "\n".join(wrong)


def test_function_local_imports_are_only_for_optional_or_slow_dependencies():
    wrong = []
    stdlib = sys.stdlib_module_names
    for name, path in MODULES.items():
        for target, line, local in _imports(name, path):
            if not local or target.split(".")[0] in stdlib or target.startswith(OPTIONAL):
                continue
            if target in MODULES and _part(target) == "_cli" and _part(name) == "_cli":
                continue  # the CLI loads one subcommand's module at a time
            wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target} inside a function")
    assert not wrong, "\n".join(wrong)



def test_opentelemetry_is_imported_at_no_module_top():
    """The `otel` extra is optional: importing judgehooks never imports it (the tracing module reads
    `opentelemetry.trace` from sys.modules, where an application that traces has put it)."""
    top = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}" for name, path in MODULES.items()
           for target, line, local in _imports(name, path) if target.startswith("opentelemetry") and not local]
    assert not top, "\n".join(top)

def test_no_module_outside_testing_and_cli_is_longer_than_about_400_lines():
    long = {str(path.relative_to(PACKAGE.parent)): n for name, path in MODULES.items()
            if _part(name) not in ("testing", "_cli") and (n := len(path.read_text().splitlines())) > 420}
    assert not long, long


def test_only_the_runtime_registers_an_exit_hook_or_a_fork_handler():
    """Process state has one owner: stores, judge processes, dispatchers and the local model
    server register closers with the Runtime instead of their own atexit / at-fork hooks."""
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("register", "register_at_fork") \
                    and isinstance(node.value, ast.Name) and node.value.id in ("atexit", "os"):
                found.append(name)
    assert sorted(found) == ["judgehooks._runtime.core", "judgehooks._runtime.core"], found
