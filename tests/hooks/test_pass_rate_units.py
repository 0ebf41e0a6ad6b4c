"""One unit per kind of place: every rate judgehooks itself reports is a fraction (0-1), and only
the shapes kept from agno (`AgentAsJudgeResult.pass_rate`, an agno db row's `pass_rate`) are
percentages, as agno's own classes compute them. Checked over one batch's records, with agno's
`AgentAsJudgeResult` beside ours."""

from __future__ import annotations

import json

from _runner import run_cli
from agno.eval.agent_as_judge import AgentAsJudgeEvaluation as AgnoEvaluation
from agno.eval.agent_as_judge import AgentAsJudgeResult as AgnoResult

from judgehooks import SQLiteStore, WindowedAlert

CASES = [{"input": f"q{i}", "output": f"a{i}"} for i in range(3)] + [
    {"input": "q3", "output": "a3 [[fail]]"}, {"input": "q4", "output": "a4 [[judge_status=500]]"}]


def test_pass_rate_is_a_percentage_only_in_agnos_shapes(make_judge, tmp_path):
    db = tmp_path / "evals.db"
    store = SQLiteStore(db)
    alerts: list = []
    watch = WindowedAlert(alerts.append, threshold=0.8, last_n=None, minutes=60, min_evaluations=4)
    result = make_judge(name="units", store=store, retries=0, on_record=watch).run(cases=CASES)
    graded = [r for r in result.records if r.status in ("passed", "failed")]
    assert [r.status for r in result.records].count("error") == 1 and len(graded) == 4

    agnos = AgnoResult(run_id="batch", results=[AgnoEvaluation(input=r.input, output=r.output, criteria="c",
                                                               score=r.score, reason=r.reason, passed=r.passed)
                                                for r in graded])
    assert result.pass_rate == agnos.pass_rate == 75.0  # agno's shape: a percentage, as agno's
    assert result.pass_fraction == 0.75  # the same rate in judgehooks' unit

    report = json.loads(run_cli("report", "--store", str(db), "--since", "all", "--json").stdout)
    assert report["total"]["pass_rate"] == 0.75 and report["total"]["error_rate"] == 0.2
    assert [a.pass_rate for a in alerts] == [0.75]  # the alert: a fraction, like its threshold
    store.close()
