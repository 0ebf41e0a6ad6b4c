"""Can I trust this judge? Grade a labelled set, keep the human labels beside the verdicts, and
compare the two with `judgehooks.calibrate`.

    python examples/calibration.py             # the scripted judge: agrees with people on 48 of 60, by design
    python examples/calibration.py --local     # then the local model (SmolLM2-135M) judges the same set
    python examples/calibration.py --store calibration.db   # where the records and labels go

The labelled set is examples/calibration_set.jsonl: 60 questions, each with an answer (24 of them
subtly wrong: a wrong year, a neighbouring planet, a near-miss number) and the human verdict.
Both judges are stored under the one evaluator name "facts": their versions differ (another
model), so `judgehooks report` keeps their pass rates apart and `calibrate --evaluator-version` picks one.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import judgehooks
from judgehooks import AgentAsJudgeEval, Calibration, SQLiteStore
from judgehooks.testing import FakeJudge

SET = Path(__file__).with_name("calibration_set.jsonl")
CRITERIA = "The answer is factually correct and answers the question asked."
REVIEWER = "example-labeller"


def load() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SET.read_text().splitlines() if line.strip()]


def scripted_judge(rows: list[dict[str, Any]]) -> FakeJudge:
    """A judge that knows the human verdicts and contradicts every fifth one: 80% agreement, by design."""
    human = {(r["question"], r["answer"]): r["human_passed"] for r in rows}
    verdicts = {(r["question"], r["answer"]): r["human_passed"] != (i % 5 == 0) for i, r in enumerate(rows)}

    def reply(request: Any) -> str:
        text = request.messages[-1]["content"]
        fenced = {label: m.group(1) for label, m in
                  ((label, re.search(rf"<<<{label}-{request.nonce}>>>\n(.*?)\n<<<END-{label}", text, re.S))
                   for label in ("INPUT", "OUTPUT")) if m}
        passed = verdicts[(fenced["INPUT"], fenced["OUTPUT"])]
        said = "agrees with" if passed == human[(fenced["INPUT"], fenced["OUTPUT"])] else "contradicts"
        return json.dumps({"passed": passed, "reason": f"scripted: {said} the human label", "nonce": request.nonce})

    return FakeJudge(reply, model="scripted/judge")


def grade_and_label(judge: AgentAsJudgeEval, rows: list[dict[str, Any]], store: SQLiteStore) -> Calibration:
    """Grade every row, label each graded record with the row's human verdict, calibrate."""
    human = {(r["question"], r["answer"]): r["human_passed"] for r in rows}
    result = judge.run(cases=[{"input": r["question"], "output": r["answer"]} for r in rows])
    for record in result.results:
        if record.status in ("passed", "failed"):
            judgehooks.label(record.id, passed=human[(record.input, record.output)], by=REVIEWER, store=store)
    errors = sum(r.status == "error" for r in result.results)
    print(f"  graded {len(result.results)} rows ({errors} judge errors), version {judge.evaluator_version}")
    return judgehooks.calibrate("facts", version=judge.evaluator_version, store=store)


def show(result: Calibration) -> None:
    ci = "-" if result.kappa_ci is None else f"{result.kappa_ci[0]:.3f} .. {result.kappa_ci[1]:.3f}"
    c = result.confusion
    print(f"  n={result.n}  accuracy={_pct(result.accuracy)}  true-pass={_pct(result.true_pass_rate)}  "
          f"true-fail={_pct(result.true_fail_rate)}")
    print(f"  kappa={_num(result.kappa)}  95% CI {ci}  confusion tp={c.tp} fp={c.fp} fn={c.fn} tn={c.tn}")
    print(f"  pass rate: raw {_pct(result.raw_pass_rate)}, corrected (Rogan-Gladen) "
          f"{_pct(result.corrected_pass_rate)}; people pass 60.0%")
    for note in result.notes:
        print(f"  note: {note}")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local", action="store_true", help="also judge with the local model (judgehooks.local)")
    parser.add_argument("--store", default="calibration.db", help="SQLite file for records and labels")
    args = parser.parse_args(argv)
    rows = load()
    store = SQLiteStore(args.store)
    print(f"{len(rows)} labelled rows, {sum(r['human_passed'] for r in rows)} of them right")

    print("\n== The scripted judge (contradicts every fifth human verdict)")
    scripted = AgentAsJudgeEval(criteria=CRITERIA, name="facts", judge=scripted_judge(rows), store=store)
    show(grade_and_label(scripted, rows, store))

    if args.local:
        from judgehooks.local import local_endpoint

        print("\n== The local model, SmolLM2-135M (llama.cpp on 127.0.0.1)")
        with local_endpoint() as endpoint:
            local = AgentAsJudgeEval(criteria=CRITERIA, name="facts", store=store, timeout=120, temperature=0,
                                     max_concurrency=2, litellm_kwargs={"max_tokens": 100},
                                     **endpoint.judge_settings())
            show(grade_and_label(local, rows, store))
    print(f"\nNext: judgehooks report --store {args.store} --since all; "
          f"judgehooks calibrate --store {args.store} --evaluator facts --evaluator-version <version>")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
