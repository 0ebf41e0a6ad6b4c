"""Record ids are uuid5 of the evaluator, run, case and version: the same strings the standard
library gives, so ids stored by earlier versions still match (the duplicate check, labels, agno rows
all look records up by them). `record_id` builds them without a `UUID` object, for speed."""

from __future__ import annotations

import uuid

import pytest

from judgehooks._base.record import _NAMESPACE, record_id

KEYS = [("facts", "run-1", None, None), ("facts", "run-1", 0, None), ("facts", "run-1", 3, "v1"),
        ("é-judge", "rün\u2603", None, "sha:ab12"), ("", "", None, ""), ("x" * 500, "\x00\x1f", 10**6, "v")]


@pytest.mark.parametrize(("evaluator", "run_id", "case", "version"), KEYS)
def test_record_ids_are_the_standard_uuid5(evaluator, run_id, case, version):
    key = f"{evaluator}\x1f{run_id}" if case is None else f"{evaluator}\x1f{run_id}\x1f{case}"
    expected = str(uuid.uuid5(_NAMESPACE, key if version is None else f"{key}\x1e{version}"))
    assert record_id(evaluator, run_id, case, version=version) == expected
