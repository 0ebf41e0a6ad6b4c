"""What a page reads from the store does not grow with the store's size where it need not: counted
on real stores (rows a SQLite query hands back, through a row factory on the store's own
connection; the times a JSONL file is opened, through an audit hook), never timed."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from _ui_fixtures import NOW
from starlette.testclient import TestClient

from judgehooks import EvalRecord, JsonlStore, SQLiteStore, calibrate, label
from judgehooks._runtime import runtime
from judgehooks.ui import app


class RowCountingStore(SQLiteStore):
    """A SQLite store that counts every row its queries hand back, whichever code path asks."""

    rows = 0

    def _connect(self) -> sqlite3.Connection:
        conn = super()._connect()
        if conn.row_factory is None:
            def counted(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> tuple[Any, ...]:
                self.rows += 1
                return row

            conn.row_factory = counted
        return conn


def graded(count: int, evaluator: str = "helpful") -> list[EvalRecord]:
    """`count` graded records of `evaluator`, half of version v1 and half of v2, every third failed."""
    return [EvalRecord(id=f"{evaluator}-{i:05d}", created_at=NOW - timedelta(seconds=count - i), evaluator=evaluator,
                       evaluator_version="v1" if i < count // 2 else "v2", mode="binary", status="failed" if i % 3 == 0
                       else "passed", passed=i % 3 != 0, input=f"question {i}", output=f"answer {i}")
            for i in range(count)]


LABELLED = 40  # of each version
#: what calibration needs: each label and each labelled record (two versions), a few count rows
FEW = 2 * (2 * LABELLED) + 20


@pytest.fixture
def large(tmp_path):
    """3,000 graded records over two versions, 40 of each version labelled by a person."""
    store = RowCountingStore(tmp_path / "evals.db")
    records = graded(3000)
    runtime.call(store.write, records)
    for record in records[:LABELLED] + records[-LABELLED:]:
        label(record.id, passed=not record.passed if record.id.endswith("7") else record.passed, by="ana", store=store)
    yield store, records
    store.close()


def test_calibration_reads_the_labelled_records_and_one_count_not_every_record(large):
    store, records = large
    store.rows = 0
    reply = TestClient(app(store), base_url="http://127.0.0.1").get("/calibration")
    assert reply.status_code == 200
    assert store.rows <= FEW, store.rows  # not the 3,000 records once per version
    sections = re.findall(r'<span class="mono">(v\d)</span></h2>\s*<p>(\d+) labelled record\(s\); (\d+) graded',
                          reply.text)
    assert sections == [("v1", str(LABELLED), "1500"), ("v2", str(LABELLED), "1500")]


def test_calibrate_reads_the_same_few_rows_and_gives_the_same_numbers(large):
    store, records = large
    store.rows = 0
    result = calibrate("helpful", store=store)  # the newest graded record's version: v2
    assert store.rows <= FEW, store.rows
    newest = [r for r in records if r.evaluator_version == "v2"]
    assert (result.version, result.versions, result.graded, result.n) == ("v2", ["v1", "v2"], 1500, LABELLED)
    assert result.raw_pass_rate == sum(r.passed for r in newest) / len(newest)
    flipped = sum(1 for r in records[-LABELLED:] if r.id.endswith("7"))
    assert result.accuracy == (LABELLED - flipped) / LABELLED


# ---- JSONL: the file read once per page, not once per 1,000 records ---------------------------------

_WATCHED: dict[str, int] = {}  # path -> times opened, while `opens` counts them


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _WATCHED and args and isinstance(args[0], (str, os.PathLike)):
        path = os.fspath(args[0])
        if path in _WATCHED:
            _WATCHED[path] += 1


sys.addaudithook(_audit)  # every open() and os.open(), in any thread (the store reads in a worker thread)


@contextlib.contextmanager
def opens(path: str) -> Iterator[dict[str, int]]:
    """How many times `path` is opened inside the block."""
    _WATCHED[path] = 0
    try:
        yield _WATCHED
    finally:
        _WATCHED.pop(path, None)


def jsonl_store(tmp_path, count: int) -> JsonlStore:
    store = JsonlStore(tmp_path / f"evals-{count}.jsonl")
    runtime.call(store.write, graded(count))
    return store


@pytest.mark.parametrize("path", ["/", "/?bucket=day&evaluator=helpful", "/records", "/records?page=3&status=failed",
                                  "/sessions", "/review", "/review?queue=sample", "/calibration"])
def test_a_page_reads_a_jsonl_store_s_file_once_however_large_it_is(tmp_path, path):
    read = {}
    for count in (300, 3000):  # the parent read the 3,000-record file 4 times a pass, twice for the overview
        store = jsonl_store(tmp_path, count)
        with opens(store.path) as opened:
            reply = TestClient(app(store, reviewer="ana"), base_url="http://127.0.0.1").get(path)
            assert reply.status_code == 200, reply.text[-300:]
            read[count] = opened[store.path]
    assert read == {300: 1, 3000: 1}


def test_a_jsonl_store_yields_every_record_once_from_one_read(tmp_path):
    store = jsonl_store(tmp_path, 3000)
    runtime.call(store.write, graded(10))  # a re-delivered record: the first line written is the one read
    with opens(store.path) as opened:
        found = runtime.call(_all, store)
        by_id = runtime.call(store.records_by_id, ["helpful-00001", "helpful-02999", "nope"])
        assert opened[store.path] == 2  # one read each
    assert len(found) == 3000 and len({r.id for r in found}) == 3000
    assert [r.created_at for r in found] == sorted((r.created_at for r in found), reverse=True)
    assert sorted(r.id for r in by_id) == ["helpful-00001", "helpful-02999"]


async def _all(store: JsonlStore) -> list[EvalRecord]:
    return [r async for r in store.iter_records()]
