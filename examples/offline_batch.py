"""Offline grading of a JSONL file: every case graded concurrently, errors reported beside the pass rate.

    python examples/offline_batch.py                 # grades examples/cases.jsonl
    python examples/offline_batch.py my_cases.jsonl  # one JSON object per line

Each line holds "input" and "output" (strings) and optionally "expected_output". A bad line stops
the script before any judge call, with the file, the line number and what is wrong. Uses the
scripted loopback server from `judgehooks.testing` (no key, no network; the sample file's
`[[score=N]]` hints steer its judge); pass `model="openai/gpt-4o-mini"` (and set OPENAI_API_KEY)
to grade with a real model.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json
import sys
from pathlib import Path
from typing import Any

from judgehooks import AgentAsJudgeEval, MemoryStore
from judgehooks.testing import StubLLMServer

SAMPLE = Path(__file__).with_name("cases.jsonl")
FIELDS = {"input": True, "output": True, "expected_output": False}  # name -> required


def read_cases(path: Path) -> list[dict[str, Any]]:
    """Cases from a JSONL file; ValueError names the file, the line and the problem."""
    cases = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}, line {number}"
            try:
                case = json.loads(line.strip())
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(case, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(case).__name__}")
            unknown = sorted(set(case) - set(FIELDS))
            if unknown:
                raise ValueError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(FIELDS)}")
            for name, required in FIELDS.items():
                if required and name not in case:
                    raise ValueError(f"{where}: missing required field {name!r}")
                if name in case and not isinstance(case[name], str):
                    raise ValueError(f"{where}: field {name!r} must be a string, got {type(case[name]).__name__}")
            cases.append(case)
    if not cases:
        raise ValueError(f"{path}: no cases (one JSON object per line)")
    return cases


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else SAMPLE
    try:
        cases = read_cases(path)
    except (OSError, ValueError) as exc:
        print(f"offline_batch: {exc}", file=sys.stderr)
        return 2
    with StubLLMServer() as server:
        judge = AgentAsJudgeEval(
            name="correct-capital",
            criteria="The output names the same city as the expected output.",
            scoring_strategy="numeric",
            threshold=8,
            model="openai/judge",
            api_base=server.base_url,
            api_key="no-key-needed",
            retries=1,
            retry_backoff=0.05,
            max_concurrency=8,
            store=MemoryStore(),
        )
        result = judge.run(cases=cases, print_summary=True, print_results=True)
    rate = "-" if result.pass_rate is None else f"{result.pass_rate:.0f}%"
    print(f"{path.name}: graded={result.graded_count} pass_rate={rate} errors={result.error_count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
