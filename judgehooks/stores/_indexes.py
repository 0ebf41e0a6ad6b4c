"""The indexes that keep `judgehooks ui`'s pages fast on a large store, the same in SQLite and
PostgreSQL but for one PostgreSQL's planner needs (`benchmarks/bench_ui.py` prints what they buy at
a million records)."""

from __future__ import annotations


def ui_indexes(table: str, *, postgres: bool = False) -> tuple[str, ...]:
    """The indexes that keep `judgehooks ui`'s pages fast on a large table: one evaluator version's verdicts
    read from the index alone (the overview's tallies, the compare page's scores and runs), a session's
    records, the pass rate per user, and the verdicts routed to review (no index of run ids: random
    keys, the costliest to write). ``postgres``: PostgreSQL's graded index holds the record id too
    (SQLite's holds the rowid), so that a page sorted by a figure is found in it alone; and one more
    holds an evaluator's verdicts by time with their scores and runs, so that a time window of one
    evaluator (the compare page's windows, the minutes at a range's edge) is read from it alone,
    not through the time index and the table (a week of one evaluator at a million records: 360 ms
    to 60 ms; SQLite reads the table's rows faster, 0.35 s for the page without it)."""
    t = table
    return (f"CREATE INDEX IF NOT EXISTS ix_{t}_graded ON {t} (evaluator, evaluator_version, agent_id, team_id, "
            "status, created_at, rejudge_of, latency_ms, cost_usd, score, run_id, run_latency_ms, run_cost_usd)"
            + (" INCLUDE (id)" if postgres else ""),
            f"CREATE INDEX IF NOT EXISTS ix_{t}_session ON {t} (session_id, created_at)",
            f"CREATE INDEX IF NOT EXISTS ix_{t}_user ON {t} (user_id, status, rejudge_of)",
            f"CREATE INDEX IF NOT EXISTS ix_{t}_routed ON {t} (created_at) WHERE review_reason IS NOT NULL",
            *([f"CREATE INDEX IF NOT EXISTS ix_{t}_window ON {t} (evaluator, created_at) "
               "INCLUDE (status, rejudge_of, score, run_id)"] if postgres else []))
