"""What a page reads from the store does not grow with the store's size where it need not: counted
on real stores (rows a SQLite query hands back, through a row factory on the store's own
connection), never timed."""

# ruff: noqa: F811  (the fixtures imported from _ui_fixtures are test parameters here)
from __future__ import annotations

import re
import sqlite3
from datetime import timedelta
from typing import Any

import pytest
from _ui_fixtures import NOW
from starlette.testclient import TestClient

from judgehooks import EvalRecord, SQLiteStore, calibrate, label
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
