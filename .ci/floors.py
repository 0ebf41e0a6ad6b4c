"""Print pip constraints that pin each of judgehooks' direct dependencies to its declared floor.

Usage: python3 .ci/floors.py pyproject.toml [extra ...]  (the lowest-versions step of .ci/compat)"""

from __future__ import annotations

import re
import sys
import tomllib

with open(sys.argv[1], "rb") as file:
    project = tomllib.load(file)["project"]
requirements = list(project["dependencies"])
for extra in sys.argv[2:]:
    requirements += project["optional-dependencies"][extra]
for requirement in requirements:
    floor = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*>=\s*([0-9][^,;\s]*)", requirement)
    if floor is not None:
        print(f"{floor.group(1)}=={floor.group(3)}")
