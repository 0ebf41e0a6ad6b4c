"""What judgehooks prints, posts and stores when the text it handles is hostile: escape sequences,
Slack markup, huge replies, `../` names, deep or huge JSON lines, and a parent that dies."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from _runner import CliResult, run_cli
from agno.agent import Agent
from agno.models.openai.like import OpenAILike

from judgehooks import AgentAsJudgeEval, SQLiteStore
from judgehooks._base.record import record_id

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
# What a terminal obeys: C0 but newline, DEL, C1 (8-bit CSI 0x9b, OSC 0x9d), bidi overrides and isolates.
STEERING = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
TITLE, CLEAR, RED, CSI8, RLO = "\x1b]0;pwned\x07", "\x1b[2J\x1b[H", "\x1b[31m", "\x9b2J", "\u202e"


def cli(*args: str) -> CliResult:
    return run_cli(*args)


# ---- 10. terminal escapes -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile_store(server, tmp_path_factory) -> tuple[Path, str]:
    """Real records whose agent name, evaluator name and judge reason carry terminal escapes."""
    db = tmp_path_factory.mktemp("hostile") / "evals.db"
    store = SQLiteStore(db)
    judge = AgentAsJudgeEval(criteria="c", name=f"help{RED}ful", model="openai/judge", api_base=server.base_url,
                             api_key="k", store=store, retries=0, timeout=60)
    agent = Agent(model=OpenAILike(id="agent", base_url=server.base_url, api_key="k"), id="agent-x",
                  name=f"{TITLE}Alice{CLEAR}", post_hooks=[judge], telemetry=False)
    reason = f"bad{TITLE}{CLEAR}{CSI8}{RLO}txt.exe\nforged line\x7f"
    agent.run(f"q [[fail]] [[reason={quote(reason)}]]")
    [record] = store.query_sync(limit=None)
    assert record.reason == reason and record.agent_name == f"{TITLE}Alice{CLEAR}"  # stored as given
    store.close()
    return db, reason


def test_print_results_shows_the_runs_and_the_judges_escapes_inert(make_judge, make_agent, capsys):
    """agno's `print_results=True` prints each evaluation from the post hook: the run's output and the
    judge's reason (a reason can move the cursor up and rewrite the table's Status row) reach the
    developer's terminal escaped, as the CLI shows them."""
    rewrite = f"\x1b[1A\r{CLEAR}Status PASSED"
    agent = make_agent(make_judge(print_results=True, retries=0))
    capsys.readouterr()
    agent.run(f"q {TITLE}{RLO} [[fail]] [[reason={quote('bad' + rewrite + CSI8)}]]")
    out = capsys.readouterr().out
    assert "FAILED" in out and "Status PASSED" in out  # the table, the reason's text shown
    assert not STEERING.search(out), repr(STEERING.findall(out))
    assert "\\u001b" in out  # each escape shown as its \u escape


@pytest.mark.parametrize("command", [["tail", "--no-follow"], ["report", "--since", "all"]])
def test_cli_text_output_carries_no_terminal_control_characters(hostile_store, command):
    db, _ = hostile_store
    result = cli(*command, "--store", str(db))
    assert result.returncode == 0, result.stderr
    assert "pwned" in result.stdout and "txt.exe" in result.stdout  # shown, but inert
    assert not STEERING.findall(result.stdout)
    assert "\\u001b]0;pwned\\u0007" in result.stdout and "\\u202e" in result.stdout
    if command[0] == "tail":
        assert len(result.stdout.splitlines()) == 1  # one record, one line: the newline cannot forge another


@pytest.mark.parametrize("command", [["tail", "--no-follow", "--json"], ["report", "--since", "all", "--json"]])
def test_cli_json_output_is_inert_and_decodes_to_the_stored_text(hostile_store, command):
    db, reason = hostile_store
    result = cli(*command, "--store", str(db))
    assert result.returncode == 0, result.stderr
    assert not STEERING.findall(result.stdout)
    data = json.loads(result.stdout)
    got = data["reason"] if command[0] == "tail" else data["worst_failures"][0]["reason"]
    assert got == reason  # the escapes are JSON escapes: a script reads the original text


def test_cli_errors_and_log_lines_on_stderr_are_inert(tmp_path):
    bad = tmp_path / f"no{TITLE}such{CSI8}.db"
    result = cli("report", "--store", str(bad))
    assert result.returncode == 1 and "pwned" in result.stderr
    assert not STEERING.findall(result.stderr)


# ---- 11. Slack and webhook contents --------------------------------------------------------------

def test_slack_text_escapes_mentions_and_disguised_links(make_judge, make_agent):
    from judgehooks import SlackNotifier
    from judgehooks.testing import WebhookReceiver

    reason = "<!channel> urgent: see <http://evil.example/x|the runbook> & <@U123>"
    with WebhookReceiver(slack=True) as slack:
        agent = make_agent(make_judge(on_fail=SlackNotifier(slack.url), name="helpful"), name="Bot<!here>")
        agent.run(f"q [[fail]] [[reason={quote(reason)}]]")
        assert judgehooks_drain()
        (body,) = slack.posts
    texts = [body["text"], body["blocks"][0]["text"]["text"], *(f["text"] for f in body["blocks"][1]["fields"])]
    assert not any("<" in t or ">" in t for t in texts)  # Slack parses only <...>: nothing here can ping or link
    assert "&lt;!channel&gt; urgent: see &lt;http://evil.example/x|the runbook&gt; &amp; &lt;@U123&gt;" in body["text"]
    assert "Bot&lt;!here&gt;" in body["text"]


def test_slack_message_over_slacks_limits_is_clipped_and_delivered(make_judge, make_agent):
    from judgehooks import SlackNotifier
    from judgehooks.testing import WebhookReceiver

    with WebhookReceiver(slack=True) as slack:
        notifier = SlackNotifier(slack.url, retries=0)
        agent = make_agent(make_judge(on_fail=notifier, name="helpful"))
        agent.run("q [[fail]] [[reason=%3C%3E%26]] [[reason_chars=16142]]")
        assert judgehooks_drain()
        assert slack.rejected == [] and notifier.stats()["sent"] == 1
        (body,) = slack.posts
    section = body["blocks"][0]["text"]["text"]
    assert len(section) <= 3000 and section.endswith("…*") and section.startswith("*helpful failed")
    assert len(body["text"]) <= 3000 and "&lt;&gt;&amp;" in body["text"]


def test_slack_limits_of_the_test_receiver_are_slacks():
    from judgehooks.testing.servers import slack_problem

    section = {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}
    assert slack_problem({"text": "t", "blocks": [section]}) == "invalid_blocks: section text longer than 3000"
    assert slack_problem({"text": "t", "blocks": [{"type": "divider"}] * 51}) == "invalid_blocks: more than 50 blocks"
    header = {"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}
    assert slack_problem({"text": "t", "blocks": [header]}) == "invalid_blocks: header text longer than 150"
    assert slack_problem({"text": "t", "blocks": [{**section, "text": {"type": "mrkdwn", "text": "ok"}}]}) is None


CARD = "4111 1111 1111 1111"


def test_webhook_posts_no_raw_input_or_output_unless_asked(make_judge, make_agent):
    from judgehooks import WebhookNotifier
    from judgehooks.testing import WebhookReceiver

    with WebhookReceiver() as receiver:
        default = WebhookNotifier(receiver.url)
        chosen = WebhookNotifier(receiver.url, fields=["run_id", "status", "input", "output"])
        judge = make_judge(on_fail=default, on_record=chosen)
        agent = make_agent(judge)
        # a run whose record id holds "4111", as one did in CI: the check must hold for it too
        run_id = next(run for i in itertools.count() if "4111" in record_id(
            judge.evaluator_name, run := f"run-{i}", version=judge.evaluator_version))
        out = agent.run(f"my card is {CARD} [[fail]]", run_id=run_id)
        assert judgehooks_drain()
        by_keys = {len(body): body for body in receiver.posts}
    small, full = by_keys[5], max(by_keys.values(), key=len)
    assert "input" not in full and "output" not in full
    # no other field carries the card: the whole number, spaces and all, which no random id can hold
    # ("4111" alone is in one record id of some thousands: a test looking for it failed in CI)
    assert [name for name, value in full.items() if CARD in json.dumps(value)] == []
    assert full["reason"] == "stub judge says fail" and full["run_id"] == out.run_id == run_id
    assert "4111" in full["id"]
    assert small == {"kind": "evaluation", "run_id": out.run_id, "status": "failed",
                     "input": f"my card is {CARD} [[fail]]", "output": out.content}


def test_webhook_fields_must_be_record_fields():
    from judgehooks import WebhookNotifier

    with pytest.raises(ValueError, match="fields must name EvalRecord fields"):
        WebhookNotifier("http://127.0.0.1:9/hook", fields=["status", "api_key"])


# ---- 15. a whole-attempt deadline for webhooks -----------------------------------------------------

def test_a_receiver_that_drips_bytes_is_cut_off_per_attempt_and_the_delivery_gives_up(make_judge, make_agent):
    from structlog.testing import capture_logs

    from judgehooks import WebhookNotifier
    from judgehooks.testing import WebhookReceiver

    with WebhookReceiver(drip=0.2) as trickle:  # every read gets a byte well within the 1 s timeout
        notifier = WebhookNotifier(trickle.url, timeout=1, retries=1, backoff=0.01)
        agent = make_agent(make_judge(on_fail=notifier))
        with capture_logs() as logs:
            agent.run("q [[fail]]")
            assert judgehooks_drain(60)  # would wait for ever on a per-read timeout
        assert trickle.attempts == 2
    assert notifier.stats() == {"sent": 0, "failed": 1, "dropped": 0, "pending": 0}
    (failed,) = [e for e in logs if e["event"] == "notify_failed"]
    assert failed["attempts"] == 2 and "no complete reply within 1 s" in failed["error"]


def judgehooks_drain(timeout: float = 30) -> bool:
    import judgehooks

    return judgehooks.drain(timeout)


# ---- 16. {name} in file_path_to_save_results -------------------------------------------------------

@pytest.mark.parametrize("name", ["../../outside", "..", "a/../../b", "..\\..\\w"])
def test_results_file_name_cannot_leave_its_folder(make_judge, tmp_path, name):
    folder = tmp_path / "deep" / "results"
    judge = make_judge(name=name, file_path_to_save_results=str(folder / "{name}-{run_id}.json"))
    result = judge.run(input="q", output="a")
    [saved] = [p for p in tmp_path.rglob("*.json")]
    assert saved.parent == folder and saved.name.endswith(f"-{result.run_id}.json")
    assert json.loads(saved.read_text())["run_id"] == result.run_id


# ---- 18. judge replies are bounded in the record -------------------------------------------------

def test_a_huge_judge_reason_is_clipped_and_the_record_says_so(make_judge, make_agent, tmp_path):
    from judgehooks._base.outcome import MAX_REASON_CHARS

    store = SQLiteStore(tmp_path / "evals.db")
    agent = make_agent(make_judge(store=store))
    agent.run("q [[fail]] [[reason_chars=1048576]]")
    [record] = store.query_sync(limit=None)
    assert record.status == "failed" and len(record.reason) == MAX_REASON_CHARS == 4096
    assert record.reason.startswith("stub judge says failxxx") and record.reason.endswith(
        " … [clipped from 1048576 characters]")
    assert record.metadata["reason_clipped_from"] == 1048576
    store.close()


def test_a_composite_keeps_each_members_reason_clipped_in_its_details(make_judge, make_agent):
    from judgehooks import Group

    store = judgehooks_memory_store()
    members = [make_judge(name=f"m{i}", store=None) for i in range(2)]
    agent = make_agent(Group(members, name="both", store=store))
    agent.run("q [[reason_chars=100000]]")
    [record] = store.records
    assert record.status == "passed"
    assert [len(line["reason"]) for line in record.details["members"]] == [4096, 4096]
    assert record.details["members"][0]["reason"].endswith("[clipped from 100000 characters]")


def judgehooks_memory_store():
    from judgehooks import MemoryStore

    return MemoryStore()


# ---- 17. judgehooks grade: deep and huge lines ----------------------------------------------------

# VmHWM: this process's own peak (ru_maxrss would start from the forking test process's size).
PEAK = """
import re, sys
from judgehooks._cli import main
code = main(sys.argv[1:])
status = open("/proc/self/status").read()
print("peak_mb", int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) // 1024, file=sys.stderr)
sys.exit(code)
"""


def grade_measured(*args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    result = subprocess.run([sys.executable, "-c", PEAK, "grade", *args, "--criteria", "c", "--store", "memory://"],
                            capture_output=True, text=True, timeout=300, env=ENV)
    return result, int(result.stderr.rsplit("peak_mb ", 1)[1])


def test_grade_refuses_a_deeply_nested_line_by_number_without_a_traceback(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"input": "q", "output": "a"}\n'
                     '{"input": "q", "output": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
                     '{"input": "q", "output": {"a": ' + "[" * 65 + "]" * 65 + "}}\n")
    result, _ = grade_measured(str(cases))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{cases}:2: JSON nested deeper than 64 levels" in result.stderr
    assert f"{cases}:3: JSON nested deeper than 64 levels" in result.stderr
    assert "2 bad line(s)" in result.stderr and "nothing graded" in result.stderr


def test_grade_refuses_a_huge_line_without_holding_it(tmp_path):
    cases = tmp_path / "cases.jsonl"
    with open(cases, "w") as f:
        f.write('{"input": "q", "output": "a"}\n')
        f.write('{"input": "' + "a" * 48_000_000 + '", "output": "x"}\n')
        f.write('{"input": "q", "output": "b"}\n')
    result, peak_mb = grade_measured(str(cases))
    assert result.returncode == 2
    assert f"{cases}:2: line longer than 16777216 bytes (--max-line-bytes): not read" in result.stderr
    assert peak_mb < 150  # reading the 48 MB line whole, then decoding and parsing it, peaks near 450 MB
    smaller, _ = grade_measured(str(cases), "--max-line-bytes", "20")
    assert f"{cases}:1: line longer than 20 bytes" in smaller.stderr and "3 bad line(s)" in smaller.stderr


# ---- 19. a helper judge process whose parent died -------------------------------------------------

JUDGE_PARENT = """
import os, signal, sys, threading, time
from judgehooks import AgentAsJudgeEval, MemoryStore
from judgehooks._judges import process
signal.signal(signal.SIGINT, signal.SIG_DFL)  # this parent dies of Ctrl-C without a word: any traceback is the child's
judge = AgentAsJudgeEval(criteria="c", model="openai/judge", api_base=sys.argv[1], api_key="k", judge_process=True,
                         store=MemoryStore(), timeout=60, retries=0)
cases = [{"input": f"q{i} [[judge_delay=3000]]", "output": "a"} for i in range(4)]
threading.Thread(target=judge.run, kwargs={"cases": cases}, daemon=True).start()
while not process._children:
    time.sleep(0.05)
[[child]] = process._children.values()
holder = os.fork()  # e.g. an application's worker process: it holds the judge's pipes open
if holder == 0:
    time.sleep(120)
    os._exit(0)
print(child.proc.pid, holder, flush=True)
time.sleep(600)
"""


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "State:\tZ" in f.read()
    except FileNotFoundError:
        return True


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGKILL the parent", "Ctrl-C to the process group"])
def test_a_judge_process_whose_parent_died_exits_quietly(server, tmp_path, how):
    import signal
    import time

    from conftest import wait_for

    errors = tmp_path / "stderr.txt"
    with open(errors, "w") as err:
        parent = subprocess.Popen([sys.executable, "-c", JUDGE_PARENT, server.base_url], stdout=subprocess.PIPE,
                                  stderr=err, text=True, env=ENV, start_new_session=True)
    child = holder = None
    try:
        child, holder = map(int, parent.stdout.readline().split())
        wait_for(lambda: server.settings.counts["judge"] >= 4, timeout=60)  # calls in flight in the child
        if how == "SIGKILL the parent":
            os.kill(parent.pid, signal.SIGKILL)
        else:
            os.killpg(parent.pid, signal.SIGINT)  # what a terminal sends: the parent, its judge and the holder
        parent.wait(30)
        wait_for(lambda: _ended(child), timeout=30)  # not held alive by the holder's copies of its pipes
        time.sleep(0.5)  # anything the child would print on its way out is written by now
    finally:
        for pid in (child, holder):
            if pid is not None and not _ended(pid):
                os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
    assert errors.read_text() == ""
