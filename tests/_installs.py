"""What a reader has installed when they paste a block: the README's install plus what the page names.

A python block of a docs page (or an example script listed on docs/examples.md) imports packages.
Each must come with an install a reader was told to run: the README's first `pip install` (the
front door), or a `pip install` written on the same page (in a block or in prose), counting every
distribution those pull in (the requirements of judgehooks' extras, read from pyproject.toml, and of
every named package, read from the installed metadata, with their own extras and markers). The
suite's `dev` extra never counts: it installs everything, so it would hide every gap.

`tests/docs/test_docs_installs.py` holds every block and example to this. An import no installed
distribution provides (`myapp.evals`, a module the page writes) is the page's own and not checked.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]

#: extras no reader is told to install for a block: the test suite's own
NOT_FOR_READERS = frozenset({"dev"})

_PIP = re.compile(r"pip3? install\s+(?P<args>[^`\n&|;#)]*)")
_OURS = re.compile(r"^(?:judgehooks|\.)(?:\[(?P<extras>[^\]]*)\])?$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Installs:
    """What `pip install` lines name: judgehooks' extras (None: judgehooks not installed by them) and
    other distributions, each with its extras."""

    extras: frozenset[str] | None
    packages: frozenset[tuple[str, frozenset[str]]]

    def __or__(self, other: Installs) -> Installs:
        extras = None if self.extras is None and other.extras is None else \
            (self.extras or frozenset()) | (other.extras or frozenset())
        return Installs(extras, self.packages | other.packages)

    def describe(self) -> str:
        named = [f"judgehooks[{','.join(sorted(self.extras))}]"] if self.extras is not None else []
        named += sorted(name for name, _ in self.packages)
        return " ".join(named) or "nothing"


NONE = Installs(None, frozenset())


def installs_named(text: str, *, first_only: bool = False) -> Installs:
    """The `pip install` commands in `text` (a page, its prose included, or a script's docstring)."""
    found = NONE
    for command in _PIP.finditer(text):
        extras: set[str] | None = None
        packages: set[tuple[str, frozenset[str]]] = set()
        for token in command["args"].split():
            token = token.strip("'\"")
            if not token or token.startswith("-"):
                continue
            ours = _OURS.match(token)
            if ours:
                extras = (extras or set()) | {e.strip() for e in (ours["extras"] or "").split(",") if e.strip()}
                continue
            try:
                requirement = Requirement(token)
            except Exception:  # not a requirement (a path, a placeholder): nothing installed by name
                continue
            packages.add((canonical(requirement.name), frozenset(requirement.extras)))
        found = found | Installs(None if extras is None else frozenset(extras - NOT_FOR_READERS),
                                 frozenset(packages))
        if first_only:
            break
    return found


@cache
def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirements(name: str, extras: frozenset[str]) -> list[Requirement]:
    """The requirements of one distribution installed with `extras`, markers evaluated here."""
    if name == "judgehooks":
        project = _pyproject()
        texts = list(project["dependencies"]) + [r for e in sorted(extras)
                                                 for r in project["optional-dependencies"].get(e, ())]
        return [Requirement(t) for t in texts]
    try:
        texts = metadata.requires(name) or []
    except metadata.PackageNotFoundError:
        return []
    found = []
    for text in texts:
        requirement = Requirement(text)
        environments = [{"extra": e} for e in extras] or [{"extra": ""}]
        if requirement.marker is None or any(requirement.marker.evaluate(env) for env in environments):
            found.append(requirement)
    return found


def closure(installs: Installs) -> frozenset[str]:
    """Every distribution (canonical name) the install commands put in place."""
    todo: list[tuple[str, frozenset[str]]] = list(installs.packages)
    if installs.extras is not None:
        todo.append(("judgehooks", installs.extras))
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        for requirement in _requirements(*item):
            todo.append((canonical(requirement.name), frozenset(requirement.extras)))
    return frozenset(name for name, _ in seen)


@cache
def _module_index() -> dict[str, str]:
    """Module (dotted) -> the installed distribution whose files hold it."""
    index: dict[str, str] = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        for file in dist.files or ():
            parts = file.parts
            if not parts or parts[0].endswith((".dist-info", ".data")) or parts[0] == "..":
                continue
            if file.suffix in (".py", ".so", ".pyd") or file.name.endswith(".pth"):
                stem = list(parts[:-1]) + ([] if file.stem.split(".")[0] == "__init__" else [file.stem.split(".")[0]])
                if stem:
                    index.setdefault(".".join(stem), name)
    return index


@cache
def _owners() -> dict[str, str]:
    """`_module_index`, each module kept only where its nearest listed ancestor has another owner:
    the deepest listed prefix of any module still names its distribution (a few hundred entries)."""
    index = _module_index()

    def inherited(module: str) -> str | None:
        while "." in module:
            module = module.rpartition(".")[0]
            if module in index:
                return index[module]
        return None

    return {module: dist for module, dist in index.items() if inherited(module) != dist}


def visibility(installed: frozenset[str]) -> dict[str, str | None]:
    """Module prefix -> None where `installed` holds its distribution, else the distribution's name:
    what tests/_docfork.py hides from a block, so it imports as it would where only these are installed."""
    owners = {module: (None if dist in installed else dist) for module, dist in _owners().items()}
    owners["judgehooks"] = None
    return owners


def provider(module: str) -> str | None:
    """The distribution that provides `module` (its deepest known package), or None: the stdlib, or
    a module no installed distribution holds (one the page writes itself)."""
    root = module.split(".")[0]
    if root in sys.stdlib_module_names or root == "__future__":
        return None
    if root == "judgehooks":
        return "judgehooks"
    index = _module_index()
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        found = index.get(".".join(parts[:end]))
        if found is not None:
            return found
    return None


def imported(source: str) -> list[tuple[str, int]]:
    """(module, line) of every absolute import in `source`, function-local ones included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.module, node.lineno))
    return found


def uncovered(source: str, installed: Iterable[str]) -> list[tuple[str, int, str]]:
    """(module, line, distribution) of each import in `source` no distribution of `installed` provides."""
    have = set(installed)
    missing = []
    for module, line in imported(source):
        dist = provider(module)
        if dist is not None and dist not in have:
            missing.append((module, line, dist))
    return missing


def readme_installs() -> Installs:
    """The README's front door: its first `pip install` (the demo's), judgehooks' extras only."""
    return installs_named((ROOT / "README.md").read_text(), first_only=True)
