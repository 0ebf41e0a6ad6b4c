"""Every fenced code block of README.md and docs/**/*.md, where it is, and what its marker says.

`tests/docs/test_docs_blocks.py` runs what this finds. A marker is an HTML comment on the line
just before a block's opening fence (blank lines between are not allowed, so a marker cannot drift
to another block):

    <!-- docs-test: skip reason="needs a paid OpenAI key" -->      shown by pytest -rs
    <!-- docs-test: continue -->                                    runs after the page's previous block
    <!-- docs-test: output -->        on a `text` block: what the blocks before it in its group print

An `output` block joins the previous block's group, and the group's output must hold its lines, in
order after any earlier output block's: `...` within a line matches any text, and a line that is
only `...` any number of lines.

A `text` block is output to read, not code to run; every block names its language.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PYTHON = frozenset({"python", "py"})
SHELL = frozenset({"bash", "sh", "shell", "console"})
TEXT = frozenset({"text"})

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*docs-test:(?P<body>.*?)-->\s*$")
_SNIPPET = re.compile(r'^\s*--8<--\s+"(?P<path>[^"]+)"\s*$')
_WORDS = frozenset({"skip", "continue", "output"})


class MarkerError(ValueError):
    """A `docs-test` marker that cannot be read: named by file and line."""


@dataclass(frozen=True)
class Block:
    path: str                  # relative to the repository, e.g. "docs/how-to/judge.md"
    line: int                  # the opening fence's line, 1-based
    lang: str                  # the info string's first word ("" when there is none)
    source: str                # the body as the page holds it, dedented
    marker: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def kind(self) -> str:
        if self.lang in PYTHON:
            return "python"
        if self.lang in SHELL:
            return "shell"
        if self.lang in TEXT:
            return "text"
        return "unknown"

    @property
    def skip_reason(self) -> str | None:
        return self.marker.get("reason") if "skip" in self.marker else None

    @property
    def continues(self) -> bool:
        return "continue" in self.marker or self.is_output

    @property
    def is_output(self) -> bool:
        """A `text` block marked `output`: what its group prints, checked."""
        return "output" in self.marker

    @property
    def code(self) -> str:
        """What the reader gets: pymdownx.snippets lines (`--8<-- "file"`) replaced by the file, as
        mkdocs renders them; a `console` block's commands without their `$ ` prompts and output."""
        lines: list[str] = []
        for line in self.source.splitlines():
            found = _SNIPPET.match(line)
            lines.extend((ROOT / found["path"]).read_text().splitlines() if found else [line])
        if self.lang == "console":
            lines = _console_commands(lines)
        return "\n".join(lines) + "\n"


def _console_commands(lines: list[str]) -> list[str]:
    commands: list[str] = []
    more = False
    for line in lines:
        if line.startswith("$ ") or more:
            commands.append(line[2:] if line.startswith("$ ") and not more else line)
            more = line.rstrip().endswith("\\")
    return commands


def parse_marker(text: str, where: str) -> dict[str, str]:
    """`skip reason="..."` -> {"skip": "", "reason": "..."}; refuses unknown words and a skip without a reason."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise MarkerError(f"{where}: docs-test marker {text.strip()!r}: {exc}") from None
    marker: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if key not in _WORDS | {"reason"} or (key in _WORDS) == bool(sep):
            raise MarkerError(f"{where}: docs-test marker {text.strip()!r}: unknown {word!r} "
                              f"(use: skip reason=\"...\", continue, output)")
        marker[key] = value
    if "skip" in marker and not marker.get("reason", "").strip():
        raise MarkerError(f"{where}: a docs-test skip needs reason=\"...\"")
    if "reason" in marker and "skip" not in marker:
        raise MarkerError(f"{where}: reason= goes with skip")
    return marker


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of one markdown file, in order."""
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if not opened:
            if _MARKER.match(lines[i]) and not (i + 1 < len(lines) and _OPEN.match(lines[i + 1])):
                raise MarkerError(f"{rel}:{i + 1}: a docs-test marker must be on the line just before a fence")
            i += 1
            continue
        indent, fence = opened["indent"], opened["fence"]
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = i + 1
        while end < len(lines) and not close.match(lines[end]):
            end += 1
        if end == len(lines):
            raise MarkerError(f"{rel}:{i + 1}: a fence that is never closed")
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:end]]
        before = _MARKER.match(lines[i - 1]) if i else None
        marker = parse_marker(before["body"], f"{rel}:{i}") if before else {}
        lang = opened["info"].strip().split(" ")[0].strip("{}.").lower() if opened["info"].strip() else ""
        found.append(Block(rel, i + 1, lang, "\n".join(body), marker))
        i = end + 1
    return found


def output_pattern(text: str) -> re.Pattern[str]:
    """An `output` block as a pattern of whole lines: `...` in a line is any text, a line of only
    `...` any number of lines; trailing spaces are ignored."""
    parts = []
    for line in text.splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.rstrip().split("...")) + r"[ \t]*\n")
    return re.compile(r"^" + "".join(parts), re.MULTILINE)


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in blocks_of(path)]


def chains(blocks: list[Block]) -> list[list[Block]]:
    """Blocks grouped to run together: a `continue` block joins the previous block of its page."""
    grouped: list[list[Block]] = []
    for block in blocks:
        if block.is_output and block.kind != "text":
            raise MarkerError(f"{block.where}: `output` marks a `text` block (what the group prints), not a "
                              f"{block.lang or 'no language'} block")
        if block.continues:
            if not grouped or grouped[-1][-1].path != block.path:
                raise MarkerError(f"{block.where}: `continue` on the first block of a page")
            grouped[-1].append(block)
        else:
            grouped.append([block])
    return grouped
