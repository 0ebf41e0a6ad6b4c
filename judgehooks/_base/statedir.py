"""Where judgehooks keeps files of its own when no store file says where: a per-user state folder.

The outbox (pending background jobs, spilled records, open sessions) of a store that is not a
local SQLite file lives here, never in the working directory: the folder platformdirs'
``user_state_dir`` names (``~/.local/state/judgehooks`` on Linux, unless ``$XDG_STATE_HOME`` says).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path


def state_dir() -> Path:
    """The per-user folder for judgehooks' own durable files (not created here)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = str(Path.home() / "Library" / "Application Support")
    else:
        xdg = os.environ.get("XDG_STATE_HOME", "")
        base = xdg if os.path.isabs(xdg) else str(Path.home() / ".local" / "state")  # the XDG spec: relative is ignored
    return Path(base) / "judgehooks"


def state_file(kind: str, key: str) -> str:
    """The path of `kind`'s file for `key` (e.g. a store's identity) in the state folder, which is
    created (0700) when missing: the same path in every process for the same key."""
    folder = state_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass  # the file's own opening then names the folder that could not be had
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return str(folder / f"{kind}-{digest}.db")
