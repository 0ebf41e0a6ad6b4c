"""A package face whose names load their modules on first use (PEP 562).

`import judgehooks` and `import judgehooks.stores` then cost almost nothing, and a name costs the
modules it needs when it is first read: `from judgehooks import AgentAsJudgeEval` does not import
the stores, alerts and CLI that the evaluator does not use.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def attach(package: str,
           exports: Mapping[str, tuple[str, ...]]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose public names live in the modules `exports`
    maps them from (relative to the package). A name, once loaded, is kept in the package's
    namespace, so later reads are plain attribute reads."""
    module_of = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(module_of))

    return __getattr__, __dir__
