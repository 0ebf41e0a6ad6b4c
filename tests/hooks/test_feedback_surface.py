"""The end user's thumbs on a real agno run: the run's id (what agno returns to the app) takes a
`judgehooks.feedback`, kept beside the run's verdict with source "user", and never counted as a
reviewer's label."""

from __future__ import annotations

import functools

import judgehooks
from judgehooks import SQLiteStore
from judgehooks._runtime import runtime


def test_a_thumb_on_an_agent_run_sits_beside_its_verdict(make_judge, make_agent, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    out = make_agent(make_judge(store=store)).run("where is my order?", user_id="u-1")
    judgehooks.feedback(out.run_id, "down", comment="wrong parcel", user_id="u-1", store=store)
    (record,) = runtime.call(functools.partial(store.query, limit=None))
    (thumb,) = runtime.call(store.read_feedback, [out.run_id])
    assert (record.run_id, record.status) == (out.run_id, "passed")
    assert (thumb.run_id, thumb.value, thumb.source, thumb.user_id, thumb.comment) == (
        out.run_id, "down", "user", "u-1", "wrong parcel")
    assert runtime.call(store.read_labels) == []  # a user's thumb is no reviewer's label
    store.close()


def test_a_thumb_on_a_team_run_given_before_its_background_verdict_is_kept(make_judge, make_team, tmp_path):
    store = SQLiteStore(tmp_path / "evals.db")
    out = make_team(make_judge(store=store, run_in_background=True, outbox=str(tmp_path / "o.db"))).run("hi")
    judgehooks.feedback(out.run_id, 4, store=store)  # a number (stars), before the verdict is stored
    assert judgehooks.drain(30)
    (thumb,) = runtime.call(store.read_feedback, [out.run_id])
    assert thumb.value == 4 and [r.run_id for r in runtime.call(functools.partial(store.query, limit=None))] == [
        out.run_id]
    store.close()
