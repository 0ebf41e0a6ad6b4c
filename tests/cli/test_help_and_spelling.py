"""`judgehooks --help`, `--version` and every `judgehooks COMMAND --help` answer from the options
alone: no agno, litellm, pydantic or store is imported (each took 1.3-1.6 s). And one spelling per
meaning across commands (`--agent-id`, `--evaluator NAME`, `--import-evaluator MODULE:ATTR`, ...),
the replaced spellings still accepted but never listed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import judgehooks
from judgehooks._cli import build_parser
from judgehooks._cli.options import ALIASES, COMMANDS, respell

#: what a --help must not import: the model clients, agno, the record model, the stores' engines,
#: the web app and the optional extras (each costs from tens of milliseconds to seconds)
HEAVY = ("agno", "litellm", "openai", "aiohttp", "pydantic", "sqlalchemy", "anyio", "structlog", "rich", "httpx",
         "starlette", "jinja2", "uvicorn", "gepa", "redis", "taskiq", "psycopg", "regex", "judgehooks.stores",
         "judgehooks._evaluators", "judgehooks._grading", "judgehooks._judges", "judgehooks._hooks",
         "judgehooks._runtime", "judgehooks._base.record")

_PROBE = """
import json, sys
from judgehooks._cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _answer(*argv: str) -> tuple[str, int, list[str]]:
    """What a fresh interpreter prints for `judgehooks ARGV`, its exit code and the modules it imported."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, timeout=120)
    seen = json.loads(done.stderr.strip().splitlines()[-1])
    return done.stdout, seen["code"], seen["modules"]


@pytest.mark.parametrize("argv", [["--help"], ["--version"], *([name, "--help"] for name in COMMANDS)],
                         ids=lambda argv: " ".join(argv))
def test_help_and_version_import_nothing_heavy(argv):
    out, code, modules = _answer(*argv)
    assert code == 0 and out.strip()
    heavy = sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY))
    assert heavy == [], f"`judgehooks {' '.join(argv)}` imported {heavy[:10]}"


def test_version_prints_the_package_version():
    out, code, _ = _answer("--version")
    assert (code, out) == (0, f"judgehooks {judgehooks.__version__}\n")


def test_a_command_still_imports_what_it_runs_with():
    """The laziness is only for --help: running a command imports its module as before."""
    out, code, modules = _answer("report", "--store", "memory://", "--json")
    assert code == 0
    assert "judgehooks._cli.report" in modules and "pydantic" in modules


def _help(command: str) -> str:
    sub = next(a for a in build_parser()._subparsers._group_actions if a.choices)  # type: ignore[union-attr]
    return sub.choices[command].format_help()


#: a value for each option the aliases stand for
_VALUES = {"--agent-id": "a", "--team-id": "t", "--import-evaluator": "m:e", "--import-agent": "m:a",
           "--from-file": "labels.jsonl", "--evaluator-version": "v1"}
#: what each command needs besides the option under test
_REQUIRED = {"grade": ["cases.jsonl"], "calibrate": ["--evaluator", "e"], "consistency": ["--evaluator", "e"],
             "optimize": ["--cases", "c.jsonl", "--reflection-model", "openai/x", "--import-agent", "m:a",
                          "--import-evaluator", "m:e"]}


@pytest.mark.parametrize(("command", "old", "new"),
                         [(c, old, new) for c, aliases in ALIASES.items() for old, new in aliases.items()])
def test_a_replaced_spelling_still_works_and_is_never_listed(command, old, new):
    parser = build_parser()
    base = [command, *_REQUIRED.get(command, [])]
    if new in base:  # the required option itself: give it the old way only
        i = base.index(new)
        base = base[:i] + base[i + 2:]
    value = _VALUES[new]
    def parsed(argv: list[str]) -> dict:
        return {k: v for k, v in vars(parser.parse_args(argv)).items() if k != "since"}  # "24h": now, each time

    spelled_new = parsed([*base, new, value])
    assert parsed(respell([*base, old, value])) == spelled_new
    assert parsed(respell([*base, f"{old}={value}"])) == spelled_new
    text = _help(command)
    assert new in text and f"{old} " not in text.replace(new, "") and f"{old}\n" not in text.replace(new, "")


def test_one_spelling_per_meaning_across_commands():
    """An option spelled the same means the same thing in every command: the agent and team ids, the
    evaluator's name, code to import; and no command lists the replaced spellings."""
    metavars: dict[str, set[str]] = {}
    for command in COMMANDS:
        sub = next(a for a in build_parser()._subparsers._group_actions if a.choices)  # type: ignore[union-attr]
        for action in sub.choices[command]._actions:
            for option in action.option_strings:
                if option in ("--agent-id", "--team-id", "--evaluator", "--import", "--import-evaluator",
                              "--import-agent", "--evaluator-version"):
                    metavars.setdefault(option, set()).add(str(action.metavar))
                assert option not in ("--agent", "--team", "--version"), (command, option)
    assert metavars == {"--agent-id": {"ID"}, "--team-id": {"ID"}, "--evaluator": {"NAME"}, "--import": {"MODULE"},
                        "--import-evaluator": {"MODULE:ATTR"}, "--import-agent": {"MODULE:ATTR"},
                        "--evaluator-version": {"V"}}


def test_respell_stops_at_the_end_of_the_options():
    assert respell(["report", "--agent", "a", "--", "--agent"]) == ["report", "--agent-id", "a", "--", "--agent"]
    assert respell(["--help"]) == ["--help"]


def test_the_review_keys_help_spelled_out_for_help_is_the_commands_own():
    from judgehooks._cli.options import REVIEW_KEYS
    from judgehooks._cli.review import HELP

    assert REVIEW_KEYS == HELP
