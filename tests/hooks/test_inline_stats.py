"""`judgehooks.stats()` lists every evaluator that grades in this process: inline ones (graded on
the run's own path, with no queue) beside background ones, with the same counters."""

from __future__ import annotations

import judgehooks
from judgehooks import Contains, MemoryStore


def test_stats_counts_inline_evaluators_beside_background_ones(make_judge, make_agent, tmp_path):
    store = MemoryStore()
    inline = make_judge(name="inline-judge", store=store)
    check = Contains(["hello"], name="inline-check", store=store, max_calls=2)
    background = Contains(["bye"], name="background-check", store=store, run_in_background=True,
                          outbox=str(tmp_path / "outbox.db"))
    agent = make_agent(inline, check, background)
    for question in ("hello", "hello again", "bye"):
        agent.run(question)
    assert judgehooks.drain(30)
    stats = judgehooks.stats()
    assert stats["background-check"]["done"] == 3 and "inline" not in stats["background-check"]
    judged = stats["inline-judge"]
    assert (judged["inline"], judged["submitted"], judged["done"], judged["in_flight"]) == (True, 3, 3, 0)
    assert judged["passed"] + judged["failed"] + judged["errors"] == 3
    checked = stats["inline-check"]  # its third run is over max_calls: done, skipped, counted over_budget
    assert (checked["done"], checked["passed"], checked["failed"], checked["over_budget"]) == (3, 2, 0, 1)
    assert checked == check.stats()
