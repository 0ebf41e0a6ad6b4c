"""Each record carries the judged run's own figures (agno's `run_output.metrics` when its post hooks
start): latency so far, tokens and cost, beside the judge's. Checked against agno's own metrics
object of the same run, for an agent and a team, inline and in the background, and through a
SQLite file."""

from __future__ import annotations

import functools

import pytest

import judgehooks
from judgehooks import SQLiteStore
from judgehooks._runtime import runtime


def _one(store, run_id):
    found = [r for r in runtime.call(functools.partial(store.query, limit=None)) if r.run_id == run_id]
    assert len(found) == 1, found
    return found[0]


def _same_as_agno(record, out, *, inline: bool = True) -> None:
    """The run's own figures are agno's, less the judge's usage that an inline judge adds to them
    after grading (as agno's own evaluator does: `accumulate_eval_metrics`)."""
    metrics = out.metrics
    folded = (record.prompt_tokens, record.completion_tokens) if inline else (0, 0)
    assert (record.run_input_tokens + folded[0], record.run_output_tokens + folded[1]) == (
        metrics.input_tokens, metrics.output_tokens)
    assert record.run_input_tokens > 0 and record.run_output_tokens > 0
    assert record.run_cost_usd == pytest.approx(metrics.cost)
    assert 0 < record.run_latency_ms <= metrics.duration * 1000 + 1  # read while the run's timer still ran


@pytest.mark.parametrize("background", [False, True])
def test_an_agent_runs_figures_are_agnos_own(make_judge, make_agent, store, background):
    agent = make_agent(make_judge(run_in_background=background))
    out = agent.run("what is up [[cost=0.002]]")
    judgehooks.drain(30)
    record = _one(store, out.run_id)
    _same_as_agno(record, out, inline=not background)
    assert record.run_cost_usd == pytest.approx(0.002)
    assert record.prompt_tokens > 0 and record.run_input_tokens != record.prompt_tokens  # the judge's are its own


@pytest.mark.anyio
async def test_an_async_team_runs_figures_are_agnos_own(make_judge, make_team, store):
    team = make_team(make_judge())
    out = await team.arun("what is up [[cost=0.001]]")
    _same_as_agno(_one(store, out.run_id), out)


def test_the_figures_are_stored_and_read_back_from_sqlite(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    out = make_agent(make_judge(store=store)).run("what is up [[cost=0.003]]")
    judgehooks.drain(30)
    store.close()
    again = SQLiteStore(tmp_path / "evals.db")
    _same_as_agno(_one(again, out.run_id), out)
    again.close()


def test_an_offline_grade_has_no_run_figures(make_judge, store):
    judge = make_judge()
    judge.run(input="q", output="a")
    (record,) = runtime.call(functools.partial(store.query, limit=None))
    assert (record.run_latency_ms, record.run_input_tokens, record.run_output_tokens, record.run_cost_usd) == (
        None, None, None, None)


@pytest.mark.parametrize("background", [False, True])
def test_token_counts_a_provider_gives_as_floats_are_kept_whole_or_left_out(make_judge, make_agent, store,
                                                                            background):
    """agno adds up what the provider reports; a provider that counts in floats leaves 12.0 there. A
    background job read back refuses a count that is not an integer, so the snapshot keeps 12.0 as 12
    and leaves out a count that is no whole number (12.5): the run is graded either way."""
    def floats(run_output) -> None:  # a post hook before ours sees what such a provider leaves
        run_output.metrics.input_tokens, run_output.metrics.output_tokens = 12.0, 3.5

    out = make_agent(floats, make_judge(run_in_background=background)).run("what is up")
    assert judgehooks.drain(30)
    record = _one(store, out.run_id)
    assert (record.status, record.run_input_tokens, record.run_output_tokens) == ("passed", 12, None)
