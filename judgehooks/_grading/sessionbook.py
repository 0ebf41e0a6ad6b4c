"""The session book: every open session's turns and due time, durable in the outbox's SQLite file.

`SessionJudge` writes each run's turn here on the hook path (one short transaction), so a crash
loses no turn. A session is due `idle_after` seconds after its last turn. A grader claims due
sessions under a lease, so exactly one process grades each window even when several processes
share the file; a lease whose holder died (same host, pid gone) or ran out is taken over. Once the
record is stored, the graded turns are deleted; turns that arrived meanwhile form the next window.

Each turn also gets a position in its session: a chain (random, one per session in this book) and
a sequence number that goes on across windows (kept `CHAIN_KEEP_S` after the session's last turn).
With broker= the position is signed with the turn, so a Redis worker sees a turn missing, moved or
replayed (`judgehooks._grading.redis.sessionworker`).

The book is bounded by the evaluator's byte budget (`max_queue_bytes`), as a background queue is:
a turn past it is refused (`TurnTooLarge`: the hook makes it its run's `skipped` record); a session
whose turns reach it is due at once, so no window grows without bound while its turns keep coming;
and a claim stops taking sessions once the turns it read reach it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from .._base.jsondata import json_bytes
from .budget import DEFAULT_MAX_QUEUE_BYTES
from .outboxfile import OutboxFile, dead_here

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS session_state (
        evaluator TEXT NOT NULL,
        session_id TEXT NOT NULL,
        spec TEXT,
        sample_rate REAL NOT NULL DEFAULT 1.0,
        next_seq INTEGER NOT NULL DEFAULT 1,
        due_at REAL,
        lease_until REAL,
        lease_owner TEXT,
        bytes INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (evaluator, session_id)
    )""",
    "CREATE INDEX IF NOT EXISTS ix_session_state_due ON session_state (evaluator, due_at)",
    """CREATE TABLE IF NOT EXISTS session_turns (
        evaluator TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        turn TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (evaluator, session_id, seq)
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS ix_session_turns_run ON session_turns (evaluator, session_id, run_id)",
    """CREATE TABLE IF NOT EXISTS session_chain (
        evaluator TEXT NOT NULL,
        session_id TEXT NOT NULL,
        chain TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        last_at REAL NOT NULL,
        PRIMARY KEY (evaluator, session_id)
    )""",
    "CREATE INDEX IF NOT EXISTS ix_session_chain_at ON session_chain (last_at)",
)
#: columns a book file made before turn positions lacks (added in place)
_POSITION_COLUMNS = (("chain", "TEXT"), ("pos", "INTEGER"))
#: the column a book file made before window sizes lacks (added in place; its sessions count from their next turn)
_SIZE_COLUMNS = (("bytes", "INTEGER NOT NULL DEFAULT 0"),)
#: how long a session's chain outlives its last turn (seconds); a later turn starts a new chain.
#: Shorter than the time Redis keeps a session's graded-through mark (`SEEN_TTL`, 7 days), so a
#: chain never goes on past the mark that says where it was graded to.
CHAIN_KEEP_S = 3 * 24 * 3600

# One step per turn: the next position in the session's chain (a new chain after `CHAIN_KEEP_S`
# idle), and a run time never before the chain's last one (two racing runs of a session keep
# their times in the order of their positions).
_POSITION = ("INSERT INTO session_chain (evaluator, session_id, chain, last_seq, last_at) VALUES (?, ?, ?, 1, ?) "
             "ON CONFLICT (evaluator, session_id) DO UPDATE SET last_seq = last_seq + 1, "
             "last_at = MAX(last_at, excluded.last_at) RETURNING chain, last_seq, last_at")

# One step per turn: the session's next sequence number, its bytes, and its due time: `:due`, or now
# once its bytes reach the budget (`:cap`). Not while a live lease holds it: those bytes count the
# window being graded, and `finish` looks again at what is left of them.
_ARM = ("INSERT INTO session_state (evaluator, session_id, spec, sample_rate, next_seq, due_at, bytes) "
        "VALUES (:evaluator, :sid, :spec, :rate, 2, CASE WHEN :size >= :cap THEN MIN(:due, :now) ELSE :due END, "
        ":size) ON CONFLICT (evaluator, session_id) DO UPDATE SET next_seq = next_seq + 1, spec = excluded.spec, "
        "bytes = bytes + :size, due_at = CASE WHEN bytes + :size >= :cap AND (lease_until IS NULL OR "
        "lease_until < :now) THEN MIN(:due, :now) ELSE :due END RETURNING next_seq - 1, due_at")


def _create(conn: sqlite3.Connection) -> None:
    """The session tables, and the columns a book file made before turn positions or window sizes lacks."""
    for statement in _SCHEMA:
        conn.execute(statement)
    for table, columns in (("session_turns", _POSITION_COLUMNS), ("session_state", _SIZE_COLUMNS)):
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for column, kind in columns:
            if column not in have:
                with contextlib.suppress(sqlite3.OperationalError):  # another process sharing the file added it first
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


class TurnTooLarge(ValueError):
    """A turn past the book's byte budget: never recorded (its run's `skipped` record names why)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"its {size} bytes pass the byte budget of {limit} bytes (max_queue_bytes)")
        self.size, self.limit = size, limit


def _sized(turn: Mapping[str, Any] | str, limit: int) -> tuple[str, int]:
    """A turn's JSON text as the book stores it, and its size in bytes (serialised once); TurnTooLarge
    past `limit`, before its bytes are decoded or written."""
    raw = turn.encode(errors="surrogatepass") if isinstance(turn, str) else json_bytes(turn)
    if len(raw) > limit:
        raise TurnTooLarge(len(raw), limit)
    return (turn if isinstance(turn, str) else raw.decode()), len(raw)


def _turn(text: Any) -> Any:
    """A stored turn as JSON data; one that is not JSON as its text, which grading refuses by name (its
    session gets an `error` record) rather than stopping every claim of the book."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return text


@dataclass(frozen=True, slots=True)
class Claim:
    """One session window taken for grading: its turns (as stored, in order) under a lease."""

    evaluator: str
    session_id: str
    sample_rate: float
    turns: tuple[dict[str, Any], ...]
    last_seq: int
    owner: str
    spec: str | None = None
    #: each turn's position in its session, (chain, sequence number); None for a turn a book file
    #: made before positions holds
    positions: tuple[tuple[str, int] | None, ...] = ()
    #: bytes of its turns as stored (what `finish` takes off the session's count)
    size: int = 0


class SessionBook:
    """Open sessions, in tables of their own in an outbox file (whose connections, fork handling,
    owner ids and WAL checkpoints it holds as an `OutboxFile`). Thread-safe; every call is one short
    transaction."""

    def __init__(self, path: str | os.PathLike[str], *, lease: float = 120.0,
                 max_bytes: int = DEFAULT_MAX_QUEUE_BYTES) -> None:
        self.file = OutboxFile(path)
        self.file.add_schema(_create)
        self.path = self.file.path
        self.lease = lease  # longer than one grading can take: its judge's timeout times its attempts
        self.max_bytes = max_bytes  # the evaluator's max_queue_bytes: a turn, a window, a claim

    def __repr__(self) -> str:
        return f"SessionBook({self.path!r})"

    @property
    def owner(self) -> str:
        return self.file.owner

    def upkeep(self) -> None:
        """Once a round of the session clock: the file's checkpoint and this owner's heartbeat (a
        lease lapses when its holder stops beating, as a job's owner is gone)."""
        self.file.upkeep()

    def reset_after_fork(self) -> None:
        self.file.reset_after_fork()

    def add_turn(self, evaluator: str, session_id: str, run_id: str, turn: Mapping[str, Any] | str, *,
                 due_at: float, sample_rate: float = 1.0, spec: str | None = None) -> float | None:
        """Record one turn and (re)arm the session's due time (the hook path): the due time it has now,
        earlier than `due_at` when its turns reach the byte budget (None: this run was recorded
        already, nothing written). A turn past the budget raises `TurnTooLarge`, nothing written."""
        now = time.time()
        with self.file.transaction() as conn:  # a raise rolls back what it wrote
            if conn.execute("SELECT 1 FROM session_turns WHERE evaluator = ? AND session_id = ? AND run_id = ?",
                            (evaluator, session_id, run_id)).fetchone() is not None:
                return None  # nothing written: the transaction commits nothing
            at = turn.get("at") if isinstance(turn, Mapping) else None
            at = float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else now
            chain, pos, at = conn.execute(_POSITION, (evaluator, session_id, os.urandom(8).hex(), at)).fetchone()
            if isinstance(turn, Mapping) and "at" in turn:
                turn = {**turn, "at": at}
            text, size = _sized(turn, self.max_bytes)
            seq, due = conn.execute(_ARM, {"evaluator": evaluator, "sid": session_id, "spec": spec,
                                           "rate": sample_rate, "due": due_at, "now": now, "size": size,
                                           "cap": self.max_bytes}).fetchone()
            conn.execute("INSERT INTO session_turns (evaluator, session_id, seq, run_id, turn, created_at, chain, "
                         "pos) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (evaluator, session_id, seq, run_id, text, now, chain, pos))
        return float(due)

    def end(self, evaluator: str | None, session_id: str) -> int:
        """Make a session due now (for `evaluator`, or every evaluator): how many were open."""
        sql = "UPDATE session_state SET due_at = 0 WHERE session_id = ? AND due_at IS NOT NULL"
        args: list[Any] = [session_id]
        if evaluator is not None:
            sql, args = sql + " AND evaluator = ?", [*args, evaluator]
        return self.file.run(sql, args)

    def _lapsed(self, owner: str | None, until: float | None, now: float, alive: Collection[str]) -> bool:
        """Whether a lease no longer holds: none, run out, or its holder is gone by the outbox file's
        one rule (not among `alive`: registered, and neither dead on this host nor silent past
        `stale_after`), as a job's owner is: a holder that never registered holds nothing."""
        if owner is None or until is None or until < now:
            return True
        return owner != self.owner and (owner not in alive or dead_here(owner))

    def claim_due(self, evaluator: str, *, now: float | None = None, limit: int = 32,
                  session_id: str | None = None, busy: Collection[str] = ()) -> list[Claim]:
        """Take up to `limit` sessions of `evaluator` that are due, oldest first, for the book's `lease`
        seconds. Sessions in `busy` (the caller is grading a window of theirs) are left as they are:
        turns that came meanwhile are claimed after. Within the byte budget, as `Outbox.claim` is:
        the first session is always taken; no other once the turns read reach the budget, or when
        its own (by the session's count) would pass it. Those stay due, for the next round."""
        now = time.time() if now is None else now
        sql = ("SELECT evaluator, session_id, sample_rate, lease_owner, lease_until, spec, bytes FROM session_state "
               "WHERE due_at IS NOT NULL AND due_at <= ? AND evaluator = ?")
        args: list[Any] = [now, evaluator]
        if session_id is not None:
            sql, args = sql + " AND session_id = ?", [*args, session_id]
        claims: list[Claim] = []
        read = 0
        with self.file.transaction() as conn:
            alive: set[str] | None = None
            for name, sid, rate, owner, until, spec, size in conn.execute(sql + " ORDER BY due_at", args).fetchall():
                if len(claims) >= limit:
                    break
                if alive is None and owner is not None and owner != self.owner:  # read once, when needed
                    alive = self.file.owners(conn)[1]
                if sid in busy or not self._lapsed(owner, until, now, alive or ()):
                    continue
                size = size if type(size) is int else 0  # a count this library never wrote: the turns read say
                if claims and (read >= self.max_bytes or read + size > self.max_bytes):
                    break
                rows = conn.execute("SELECT seq, turn, chain, pos, LENGTH(CAST(turn AS BLOB)) FROM session_turns "
                                    "WHERE evaluator = ? AND session_id = ? ORDER BY seq", (name, sid)).fetchall()
                if not rows:  # nothing left to grade (e.g. its turns were graded by a process that then died)
                    conn.execute("DELETE FROM session_state WHERE evaluator = ? AND session_id = ?", (name, sid))
                    continue
                conn.execute("UPDATE session_state SET lease_owner = ?, lease_until = ? "
                             "WHERE evaluator = ? AND session_id = ?", (self.owner, now + self.lease, name, sid))
                window = sum(r[4] or 0 for r in rows)
                read += window
                claims.append(Claim(evaluator=name, session_id=sid, sample_rate=rate, spec=spec,
                                    turns=tuple(_turn(r[1]) for r in rows), last_seq=rows[-1][0],
                                    owner=self.owner, size=window, positions=tuple(
                                        (str(r[2]), r[3]) if r[2] is not None and type(r[3]) is int else None
                                        for r in rows)))
        return claims

    def finish(self, claim: Claim) -> None:
        """The window's record is stored: forget its turns; the session stays open only when turns
        arrived meanwhile (their due time stands, and their bytes stay counted: due now if they
        reach the budget)."""
        key = (claim.evaluator, claim.session_id)
        with self.file.transaction() as conn:
            conn.execute("DELETE FROM session_turns WHERE evaluator = ? AND session_id = ? AND seq <= ?",
                         (*key, claim.last_seq))
            left = conn.execute("SELECT 1 FROM session_turns WHERE evaluator = ? AND session_id = ? LIMIT 1",
                                key).fetchone()
            if left is None:
                conn.execute("DELETE FROM session_state WHERE evaluator = ? AND session_id = ?", key)
            else:
                conn.execute("UPDATE session_state SET lease_owner = NULL, lease_until = NULL, bytes = MAX(bytes - "
                             ":size, 0), due_at = CASE WHEN bytes - :size >= :cap THEN MIN(due_at, :now) ELSE due_at "
                             "END WHERE evaluator = :evaluator AND session_id = :sid",
                             {"size": claim.size, "cap": self.max_bytes, "now": time.time(), "evaluator": key[0],
                              "sid": key[1]})
            conn.execute("DELETE FROM session_chain WHERE last_at < ?", (time.time() - CHAIN_KEEP_S,))

    def give_back(self, claim: Claim, *, retry_at: float) -> None:
        """Give a claim back ungraded (the store was down, or Redis could not take its turns): due
        again at `retry_at`."""
        self.file.run("UPDATE session_state SET lease_owner = NULL, lease_until = NULL, due_at = MAX(due_at, ?) "
                      "WHERE evaluator = ? AND session_id = ? AND lease_owner = ?",
                      (retry_at, claim.evaluator, claim.session_id, claim.owner))

    def release_mine(self) -> None:
        """At exit: give back every lease this process holds, so the next process need not wait for it."""
        with self.file.lock:
            if self.file.open:
                self.file.connect().execute("UPDATE session_state SET lease_owner = NULL, lease_until = NULL "
                                   "WHERE lease_owner = ?", (self.owner,))

    def next_due(self, evaluator: str) -> float | None:
        """The earliest time a session of `evaluator` may need grading: a due time, or a lease running out."""
        [(due,)] = self.file.rows("SELECT MIN(CASE WHEN lease_until > due_at THEN lease_until ELSE due_at END) "
                                  "FROM session_state WHERE due_at IS NOT NULL AND evaluator = ?", (evaluator,))
        return None if due is None else float(due)

    def turns_waiting(self, evaluator: str | None = None) -> dict[str, int]:
        """Turns waiting to be graded, per evaluator with open sessions (or of one)."""
        where = "" if evaluator is None else " WHERE evaluator = ?"
        args = () if evaluator is None else (evaluator,)
        return dict(self.file.rows(f"SELECT evaluator, COUNT(*) FROM session_turns{where} GROUP BY evaluator", args))

    def specs(self) -> dict[str, str | None]:
        """Each evaluator with open sessions, and the spec its process stored (for `judgehooks resume`)."""
        return dict(self.file.rows("SELECT evaluator, MAX(spec) FROM session_state GROUP BY evaluator"))
