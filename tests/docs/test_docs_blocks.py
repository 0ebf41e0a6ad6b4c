"""Every code block in README.md and docs/ runs as written, against the loopback stub server.

A reader pastes a block into a file or a shell with a provider key in the environment. Here the
environment points the provider at `judgehooks.testing.StubLLMServer` instead (`OPENAI_BASE_URL`
for agno's OpenAI models, `OPENAI_API_BASE` for litellm, a dummy `OPENAI_API_KEY`), each block
group works in an empty directory of its own with a `HOME` of its own, and nothing else changes:
python blocks run as a script would (`__name__ == "__main__"`, atexit hooks at the end) in a
process forked from a warm interpreter (tests/_docfork.py), shell blocks in `bash -e -o pipefail`
with the `judgehooks` command on PATH. A block that cannot run here carries
``<!-- docs-test: skip reason="..." -->`` on the line before its fence, and pytest -rs shows the
reason; ``<!-- docs-test: continue -->`` runs a block after the previous one of its page, in the
same directory (and, for consecutive python blocks, the same namespace). How to mark a block:
tests/README.md.

This environment has every extra; a reader has what the README's install and the page's own
`pip install` lines gave them. So python blocks import only what those install (any other module is
refused as not installed: tests/_installs.py), and every block's imports, skipped blocks' and the
examples' included, are imported that way too.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _docblocks import ROOT, Block, MarkerError, all_blocks, blocks_of, chains, output_pattern
from _installs import Installs, closure, imported, installs_named, provider, readme_installs, uncovered, visibility

from judgehooks.testing import StubLLMServer

BLOCKS = all_blocks()
CHAINS = chains(BLOCKS)
TIMEOUT = 120  # seconds per group: a hang ends as a failure naming the block, not a stuck worker

# never run unmarked: a block that installs or downloads would change the machine the suite runs on
_INSTALLS = re.compile(r"(?<![\w-])(pip3? install|-m venv|apt-get|apt install|spacy download|curl|wget)\b")

# what the reader's shell may hold that would steer a block elsewhere than the stub
_STEERING = ("JUDGEHOOKS_", "OPENAI_", "ANTHROPIC_", "LITELLM_", "AZURE_", "GEMINI_", "LOGFIRE_")


def block_env(server: StubLLMServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STEERING) and k != "PYTHONPATH"}
    env.update(OPENAI_API_KEY="sk-docs-test", OPENAI_BASE_URL=server.base_url, OPENAI_API_BASE=server.base_url,
               LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1",
               # `judgehooks` and `python` as an activated virtualenv gives them
               PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]))
    return env


class Forker:
    """The warm interpreter of tests/_docfork.py, and its replies."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self._log = log.open("w")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).parents[1] / "_docfork.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     env=env, cwd=log.parent, text=True, bufsize=1)
        self._replies: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        ready = self._replies.get(timeout=TIMEOUT)
        assert ready == "ready", (ready, log.read_text())

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._replies.put(line.strip())
        self._replies.put("")

    def run(self, blocks: list[Block], cwd: Path, out: Path, env: dict[str, str | None],
            installs: Installs | None = None) -> int:
        """Run `blocks` in one fresh process, where only what `installs` installs can be imported
        (None: everything here); its exit status (a negative signal number if killed)."""
        assert self.proc.stdin is not None
        request = {"cwd": str(cwd), "out": str(out), "env": env,
                   "blocks": [{"path": str(ROOT / b.path), "line": b.line, "code": b.code} for b in blocks]}
        if installs is not None:
            request |= {"hide": visibility(closure(installs)), "installs": f"`pip install {installs.describe()}`"}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        pid = json.loads(self._replies.get(timeout=TIMEOUT))["pid"]
        try:
            done = self._replies.get(timeout=TIMEOUT)
        except queue.Empty:
            os.killpg(pid, signal.SIGKILL)  # the child leads its own process group: the block's children too
            done = self._replies.get(timeout=TIMEOUT)
            with out.open("a") as f:
                f.write(f"\n[killed after {TIMEOUT} s]\n")
        return int(json.loads(done)["status"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@pytest.fixture(scope="session")
def forker(server: StubLLMServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forker]:
    forker = Forker(block_env(server), tmp_path_factory.mktemp("docfork") / "forker.log")
    yield forker
    forker.close()


def run_shell(block: Block, cwd: Path, out: Path, env: dict[str, str]) -> int:
    with out.open("a") as f:
        try:
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=cwd, env=env,
                                  stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=TIMEOUT, start_new_session=True)
        except subprocess.TimeoutExpired:
            f.write(f"\n[killed after {TIMEOUT} s]\n")
            return -9
    return done.returncode


def page_installs(path: str) -> Installs:
    """What a reader of the page at `path` installed: the README's install and the page's own lines."""
    page = ROOT / path
    return readme_installs() | (installs_named(page.read_text()) if page.is_relative_to(ROOT) else readme_installs())


def run_chain(chain: list[Block], forker: Forker, server: StubLLMServer, tmp_path: Path) -> tuple[str, str]:
    """Run a group of blocks in order in one empty directory, python blocks with only the packages
    their page's reader installed; (the output, the failing block's file:line or "")."""
    cwd, home, out = tmp_path / "work", tmp_path / "home", tmp_path / "output.txt"
    cwd.mkdir()
    home.mkdir()
    out.touch()
    per_run: dict[str, str | None] = {"HOME": str(home), "XDG_DATA_HOME": None, "XDG_STATE_HOME": None,
                                      "XDG_CONFIG_HOME": None, "XDG_CACHE_HOME": None}
    shell_env = {**block_env(server), "HOME": str(home)}
    for key in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        shell_env.pop(key, None)
    i = 0
    while i < len(chain):
        if chain[i].is_output:  # read once the group has run (unmatched_output)
            i += 1
        elif chain[i].kind == "python":
            # consecutive python blocks share one process and namespace, as one script (the output
            # blocks between them only show what they print)
            j = i
            while j < len(chain) and (chain[j].kind == "python" or chain[j].is_output):
                j += 1
            code = [b for b in chain[i:j] if b.kind == "python"]
            status = forker.run(code, cwd, out, per_run, page_installs(chain[i].path))
            if status != 0:
                return out.read_text(), failing_block(code, out.read_text())
            i = j
        else:
            if run_shell(chain[i], cwd, out, shell_env) != 0:
                return out.read_text(), chain[i].where
            i += 1
    return out.read_text(), ""


def unmatched_output(chain: list[Block], output: str) -> str | None:
    """The first `output` block of the group whose lines the group's output does not hold, in
    order (see _docblocks.output_pattern), with what was printed; None when every one matches."""
    at = 0
    for block in (b for b in chain if b.is_output):
        found = output_pattern(block.source).search(output, at)
        if found is None:
            return (f"{block.where} shows output the blocks before it do not print.\nthe page shows:\n"
                    f"{block.source}\nthey printed (after the previous output block):\n{output[at:][-4000:]}")
        at = found.end()
    return None


def failing_block(blocks: list[Block], output: str) -> str:
    for block in blocks:
        if f"docs block {ROOT / block.path}:{block.line} raised" in output:
            return block.where
    return blocks[-1].where + " (or its exit)"


def chain_id(chain: list[Block]) -> str:
    return chain[0].where + "".join(f",{b.line}" for b in chain[1:])


def chain_param(chain: list[Block]) -> object:
    """The group as a test case; skipped at collection (no warm interpreter started for it) when
    it is output, or marked."""
    reason = (f"{chain[0].where}: a text block: output to read, not code to run" if chain[0].kind == "text" else
              "; ".join(f"{b.where}: {b.skip_reason}" for b in chain if b.skip_reason))
    return pytest.param(chain, id=chain_id(chain), marks=[pytest.mark.skip(reason=reason)] if reason else [])


@pytest.mark.parametrize("chain", [chain_param(chain) for chain in CHAINS])
def test_docs_block_runs_as_written(chain: list[Block], forker: Forker, server: StubLLMServer,
                                    tmp_path: Path) -> None:
    assert all(b.kind in ("python", "shell") or b.is_output for b in chain), [(b.where, b.lang) for b in chain]
    for block in chain:
        installs = _INSTALLS.search(block.code) if block.kind == "shell" else None
        assert not installs, (f"{block.where} runs {installs[0]!r}: it would change this machine's "
                              f"environment; mark it <!-- docs-test: skip reason=\"...\" -->")
    output, failed = run_chain(chain, forker, server, tmp_path)
    assert not failed, f"the docs block at {failed} does not run as written:\n{output[-6000:]}"
    differs = unmatched_output(chain, output)
    assert differs is None, differs
    # what a script can survive and still print: a traceback from a thread or an exit hook, an error log
    troubles = [line for line in output.splitlines() if "Traceback (most recent call last)" in line
                or "level='error'" in line or line.startswith("Exception ignored")]
    assert troubles == [], f"{chain_id(chain)} ran, but printed trouble:\n{output[-6000:]}"


EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
PAGES = sorted({b.path for b in BLOCKS if b.kind == "python"})


def example_row(script: str) -> str:
    """The line of docs/examples.md that lists `script`: what its reader installs, besides the README."""
    rows = [line for line in (ROOT / "docs" / "examples.md").read_text().splitlines()
            if re.search(rf"`python examples/{re.escape(script)}\b", line)]
    assert rows, f"docs/examples.md does not list examples/{script}"
    return rows[0]


def check_imports(sources: list[tuple[str, int, str]], installs: Installs, forker: Forker, tmp_path: Path) -> None:
    """Every import of `sources` ((file, line before the code, code)) is of a package `installs`
    installs, directly (read with ast) and in what importing it loads (imported in a child where
    nothing else is)."""
    have = closure(installs)
    direct = [f"{path}:{start + line} imports {module} ({dist})" for path, start, code in sources
              for module, line, dist in uncovered(code, have)]
    assert direct == [], (f"the reader installed {installs.describe()} (the README's install and the `pip install` "
                          "lines of the page, or of the example's row on docs/examples.md), which does not bring:\n"
                          + "\n".join(direct)
                          + "\nname it in a `pip install` line on the page, or put it in the right extra")
    modules = sorted({module for _, _, code in sources for module, _ in imported(code) if provider(module) is not None})
    code = "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    (tmp_path / "work").mkdir(parents=True)
    out = tmp_path / "output.txt"
    status = forker.run([Block(sources[0][0], 0, "python", code)], tmp_path / "work", out, {}, installs)
    assert status == 0, (f"importing what {sources[0][0]} imports needs more than {installs.describe()}:\n"
                         + out.read_text()[-1500:])


@pytest.mark.parametrize("page", PAGES)
def test_every_import_of_a_page_is_installed_by_the_readme_or_the_page(page: str, forker: Forker,
                                                                       tmp_path: Path) -> None:
    """Skipped blocks too: a reader pastes them as well."""
    sources = [(b.path, b.line, b.code) for b in BLOCKS if b.path == page and b.kind == "python"]
    check_imports(sources, page_installs(page), forker, tmp_path)


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_import_of_an_example_is_installed_by_the_readme_or_its_row_on_the_examples_page(
        script: Path, forker: Forker, tmp_path: Path) -> None:
    installs = readme_installs() | installs_named(example_row(script.name))
    check_imports([(f"examples/{script.name}", 0, script.read_text())], installs, forker, tmp_path)


def test_the_install_check_sees_what_a_page_does_not_name(forker: Forker, tmp_path: Path) -> None:
    """It can fail: fastapi imported directly, and fastapi again through agno.os (AgentOS), comes with
    no install of the README's; a page's line naming it counts; the suite's `dev` extra never does."""
    block = "from fastapi import FastAPI\nimport judgehooks\nimport json\nimport myapp.evals\n"
    assert [(m, d) for m, _, d in uncovered(block, closure(readme_installs()))] == [("fastapi", "fastapi")]
    named = readme_installs() | installs_named("Install it: `pip install 'judgehooks[ui]' fastapi`.")
    assert uncovered(block, closure(named)) == []
    assert uncovered("from pydantic_evals import Dataset\n", closure(installs_named("pip install -e '.[dev]'")))
    agentos = [("page.md", 3, "from agno.os import AgentOS\n")]
    assert uncovered(agentos[0][2], closure(readme_installs())) == []  # agno is installed: only importing it tells
    with pytest.raises(AssertionError, match="fastapi is not installed by `pip install judgehooks"):
        check_imports(agentos, readme_installs(), forker, tmp_path / "a")
    check_imports(agentos, readme_installs() | installs_named("pip install 'agno[os]'"), forker, tmp_path / "b")


def test_every_block_names_its_language() -> None:
    """A block's language decides how it is run (python, a shell) or that it is output (text)."""
    unknown = [f"{b.where}: {b.lang or 'no language'}" for b in BLOCKS if b.kind == "unknown"]
    assert unknown == []


def test_a_broken_block_fails_naming_its_file_and_line(forker: Forker, server: StubLLMServer,
                                                       tmp_path: Path) -> None:
    """The runner can fail, and says where: a block with a missing import, as a newcomer meets it."""
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\nfrom judgehooks import AgentAsJudgeEval\n\n"
                    "judge = AgentAsJudgeEval(criteria='Answers', model='openai/gpt-4o-mini')\n```\n\n"
                    "<!-- docs-test: continue -->\n```python\nagent = Agent(post_hooks=[judge])\n```\n")
    blocks = [Block(str(page), 3, "python", page.read_text().split("```python\n")[1].split("```")[0]),
              Block(str(page), 10, "python", "agent = Agent(post_hooks=[judge])\n", {"continue": ""})]
    output, failed = run_chain(blocks, forker, server, tmp_path)
    assert failed == f"{page}:10"
    assert "NameError: name 'Agent' is not defined" in output
    assert f'File "{ROOT / page}", line 11' in output  # the page's own line of the failing code


def test_an_output_block_is_checked_against_what_its_group_prints(forker: Forker, server: StubLLMServer,
                                                                   tmp_path: Path) -> None:
    """A page's shown output is held to what the blocks print: `...` spans text within a line, a
    `...` line spans lines, and a page that shows a pass where the block gets an error fails,
    naming the output block (as checks.md's LabelMatch example did: its expected value was no label)."""
    page = tmp_path / "page.md"
    page.write_text("""# Page

```python
from judgehooks import LabelMatch

result = LabelMatch(["positive", "negative"]).run(input="q", output="Positive!", expected_output=EXPECTED)
print("noise")
record = result.records[0]
print(record.status, record.reason or record.error_message)
```

<!-- docs-test: output -->
```text
...
passed label 'positive', ...
```
""")
    for expected, status in (("positive", None), ("Paris", "error")):
        blocks = blocks_of(page)
        code = blocks[0].source.replace("EXPECTED", repr(expected))
        [chain] = chains([Block(blocks[0].path, blocks[0].line, "python", code), blocks[1]])
        run = tmp_path / expected
        run.mkdir()
        output, failed = run_chain(chain, forker, server, run)
        assert not failed, output
        differs = unmatched_output(chain, output)
        if status is None:
            assert differs is None
        else:
            assert differs is not None and f"{page}:13 shows output the blocks before it do not print" in differs
            assert "the run's expected value 'Paris' is not one of the labels" in differs.splitlines()[-1]


def test_the_sessions_page_worker_command_runs_as_written(redis_base: str, server: StubLLMServer,
                                                         tmp_path: Path) -> None:
    """The worker command of docs/how-to/sessions.md starts from a shell that holds no job key
    (issue 25, trap 5: `--rebuild` refuses to start without $JUDGEHOOKS_JOB_KEY, which the page did
    not set), serves, and stops on SIGTERM. Only the broker URL changes: the suite's Redis, not
    the reader's 127.0.0.1:6379."""
    import redis

    client = redis.Redis.from_url(redis_base)
    client.flushdb()
    client.close()
    [block] = [b for b in BLOCKS if b.path == "docs/how-to/sessions.md" and "judgehooks worker" in b.code]
    assert block.code.count("redis://127.0.0.1:6379/0") == 1
    env = {**block_env(server), "HOME": str(tmp_path)}
    assert not any(key.startswith("JUDGEHOOKS_") for key in env)
    worker = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c",
                               block.code.replace("redis://127.0.0.1:6379/0", redis_base)],
                              cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert worker.stdout is not None
    seen = []
    try:
        for line in worker.stdout:  # until the worker says it serves, or the command ends
            seen.append(line)
            if ": grading from " in line:
                break
        assert seen and ": grading from " in seen[-1], "".join(seen)
        assert "rebuilds SessionJudge from jobs" in seen[-1]
        assert not any("NOT authenticated" in line for line in seen)  # the page's key signs the turns
    finally:
        os.killpg(worker.pid, signal.SIGTERM)  # the block's own process group: bash and the worker
        rest = worker.stdout.read()
        worker.wait(timeout=60)
    assert ": stopped; 0 graded" in rest, "".join(seen) + rest


def test_markers_say_why_a_block_is_skipped_and_which_blocks_run_together(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text('''# Page

<!-- docs-test: skip reason="needs a paid key" -->
```python
paid()
```

- a list item:

  ```bash
  judgehooks report --store evals.db
  ```

<!-- docs-test: continue -->
```console
$ judgehooks tail --store evals.db \\
    --no-follow
2026-12-02T07:50:26Z passed  helpful
```

```python
--8<-- "tests/_docfork.py"
```
''')
    first, listed, console, included = blocks_of(page)
    assert (first.line, first.kind, first.skip_reason) == (4, "python", "needs a paid key")
    assert (listed.line, listed.kind, listed.code) == (10, "shell", "judgehooks report --store evals.db\n")
    assert console.continues and console.code == "judgehooks tail --store evals.db \\\n    --no-follow\n"
    assert included.code == (ROOT / "tests" / "_docfork.py").read_text()  # as mkdocs' snippets renders it
    assert [[b.line for b in chain] for chain in chains([first, listed, console, included])] == [[4], [10, 15], [21]]


@pytest.mark.parametrize(("marker", "error"), [
    ("<!-- docs-test: skip -->\n```python\n```", 'a docs-test skip needs reason="..."'),
    ("<!-- docs-test: skipp reason=\"x\" -->\n```python\n```", "unknown 'skipp'"),
    ("<!-- docs-test: continue -->\n\n```python\n```", "must be on the line just before a fence"),
    ("<!-- docs-test: continue -->\n```python\n```", "`continue` on the first block of a page"),
])
def test_a_marker_that_cannot_be_read_stops_the_run_naming_its_line(tmp_path: Path, marker: str, error: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\n{marker}\n")
    with pytest.raises(MarkerError, match=re.escape(error)):
        chains(blocks_of(page))
