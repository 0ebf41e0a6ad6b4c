"""After os.fork() the child has none of the parent's threads: no judgehooks loop, no judge
process readers. Reset that state in the child so its hooks start their own (a gunicorn
`--preload` worker, a multiprocessing child). Jobs the parent persisted stay the parent's."""

from __future__ import annotations

import os
from typing import Any

# The parent's portal objects, kept referenced in the child: letting them be collected would run
# their shutdown code, which waits on a loop thread that does not exist here.
_orphans: list[Any] = []


def _after_fork_in_child() -> None:
    from . import _background, _judgeproc, _portal
    from .dispatch._dispatcher import _registry

    _orphans.append((_portal._portal, _portal._stack, dict(_judgeproc._children)))
    _portal._portal = None
    _portal._stack = None
    _portal._loop = None
    _background._pending.clear()
    _judgeproc._children.clear()
    for dispatcher in _registry.all():
        dispatcher.reset_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
