"""JsonlStore: append-only JSON Lines for log shipping."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest
from conftest import rec
from structlog.testing import capture_logs

from judgehooks import EvalRecord, JsonlStore


@pytest.mark.anyio
async def test_batches_append_one_whole_json_object_per_line(tmp_path):
    store = JsonlStore(tmp_path / "evals.jsonl")
    await store.write([rec(1), rec(2)])
    await store.write([rec(3, status="error", passed=None, score=None, error_type="Timeout")])
    await store.aclose()
    lines = (tmp_path / "evals.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["id-1", "id-2", "id-3"]
    assert EvalRecord.model_validate_json(lines[0]) == rec(1, created_at=json.loads(lines[0])["created_at"])


@pytest.mark.anyio
async def test_a_torn_last_line_is_ended_and_skipped_and_nothing_after_it_is_lost(tmp_path):
    path = tmp_path / "evals.jsonl"
    path.write_text(rec(1).model_dump_json() + "\n" + rec(2).model_dump_json()[:40])  # crashed mid-line
    store = JsonlStore(path)
    await store.write([rec(3)])
    with capture_logs() as logs:
        found = await store.query()
    assert sorted(r.id for r in found) == ["id-1", "id-3"]
    [skipped] = [e for e in logs if e["event"] == "jsonl_line_skipped"]
    assert skipped["line"] == 2
    assert path.read_text().splitlines()[2] == rec(3, created_at=found[0].created_at).model_dump_json()


@pytest.mark.anyio
async def test_query_filters_and_returns_each_id_once(tmp_path):
    store = JsonlStore(tmp_path / "evals.jsonl")
    await store.write([rec(1), rec(2, agent_id="b", status="failed", passed=False)])
    await store.write([rec(1, status="failed")])  # re-delivered: appended, read once
    assert [(r.id, r.status) for r in await store.query(agent_id="a")] == [("id-1", "passed")]
    assert [r.id for r in await store.query(status="failed")] == ["id-2"]
    assert len(await store.query(limit=None)) == 2


def test_concurrent_processes_never_interleave_inside_a_line(tmp_path):
    path = tmp_path / "evals.jsonl"
    code = """
import sys, anyio
from judgehooks import EvalRecord, JsonlStore
store = JsonlStore(sys.argv[1])
big = "x" * 20000
async def main():
    for b in range(20):
        await store.write([EvalRecord(id=f"{sys.argv[2]}-{b}-{i}", status="passed", evaluator="e", mode="binary",
                                      passed=True, output=big) for i in range(10)])
anyio.run(main)
"""
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), f"p{n}"]) for n in range(3)]
    assert [p.wait(60) for p in procs] == [0, 0, 0]
    ids = [EvalRecord.model_validate_json(line).id for line in path.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 3 * 20 * 10


def test_a_record_still_being_appended_by_another_process_is_not_taken_for_a_torn_line(tmp_path):
    """A new writer decides about a torn last line under the writers' lock: it waits for the other
    process's write to finish instead of ending that record early (the race that emptied a line)."""
    import fcntl
    import os
    import threading

    from judgehooks._base.jsondata import record_json

    path = tmp_path / "evals.jsonl"
    line = (record_json(rec(1, output="x" * 50_000)) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another writer, half way through copying its record in
    os.write(fd, line[:1000])
    writer = threading.Thread(target=anyio.run, args=(JsonlStore(path).write, [rec(2)]))
    writer.start()
    writer.join(0.3)
    assert writer.is_alive(), "the new writer appended while another held the lock"
    os.write(fd, line[1000:])
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    writer.join(10)
    assert [json.loads(text)["id"] for text in path.read_text().split("\n")[:-1]] == ["id-1", "id-2"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"path": ":memory:"}, "must be a file path"),
    ({"path": "/nonexistent-dir/x.jsonl"}, "directory '/nonexistent-dir' does not exist"),
    ({"path": "x.jsonl", "fsync": "yes"}, "fsync must be True or False"),
])
def test_bad_settings_are_refused_naming_the_parameter(kwargs, message):
    with pytest.raises(ValueError, match=message):
        JsonlStore(**kwargs)


def test_hook_records_are_shipped_as_lines(make_judge, make_agent, tmp_path):
    store = JsonlStore(tmp_path / "evals.jsonl", fsync=True)
    agent = make_agent(make_judge(store=store), id="jsonl-agent")
    run_ids = [agent.run(f"q{i}").run_id for i in range(3)]
    lines = [json.loads(line) for line in (tmp_path / "evals.jsonl").read_text().splitlines()]
    assert sorted(line["run_id"] for line in lines) == sorted(run_ids)
    assert {line["agent_id"] for line in lines} == {"jsonl-agent"}
