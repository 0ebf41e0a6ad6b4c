"""The command line: every subcommand's options, their types, and the one spelling of each.

`judgehooks --help`, `judgehooks --version` and every `judgehooks COMMAND --help` are answered from
this module alone, which imports nothing of judgehooks but the time parser: the command's own module
(and with it agno, litellm, pydantic, the stores) is imported only to run it. Each function here
adds one command's options; its docstring's first line is the command's help.

One spelling per meaning, in every command:
- what records hold: ``--agent-id ID``, ``--team-id ID``, ``--evaluator NAME``, ``--evaluator-version V``;
- your code: ``--import MODULE`` (a module whose evaluators are used), ``--import-evaluator MODULE:ATTR``
  and ``--import-agent MODULE:ATTR`` (one object);
- files and stores to read from: ``--from-file FILE``, ``--from-store URL``; where records go: ``--store URL``.
Spellings replaced by these stay accepted, unlisted (`ALIASES`).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from datetime import datetime

from .._base.when import parse_when
from .cases import MAX_LINE_BYTES

#: where the web UI's access token may also come from, so it stays out of `ps` and the shell history
TOKEN_ENV = "JUDGEHOOKS_UI_TOKEN"
#: what `judgehooks export` writes
FORMATS = ("jsonl", "pydantic-evals")


class CommandError(Exception):
    """Ends a command with ``judgehooks: <message>`` on stderr and exit status ``code``, no traceback."""
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# ---- types ------------------------------------------------------------------------------------

def parse_time(value: str, *, now: datetime | None = None) -> datetime:
    """A point in time from ``24h`` / ``30m`` / ``7d`` / ``2w`` / ``90s`` ago, or an ISO 8601 time
    (UTC when it has no offset). Bad input raises ArgumentTypeError, which argparse reports."""
    try:
        return parse_when(value, now=now)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def since_or_all(value: str) -> datetime | None:
    """`parse_time`, or None for ``all`` (no lower bound)."""
    return None if value.strip().lower() == "all" else parse_time(value)


def count(value: str) -> int:
    """An argparse type: an integer >= 0."""
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value!r}")
    return number


def finite(value: str) -> float:
    """An argparse type: a finite number (argparse's `float` takes "nan" and "inf", and a NaN
    timeout or rate switches its control off)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"expected a finite number (not NaN or infinity), got {value!r}")
    return number


# ---- options several commands share -------------------------------------------------------------

def add_store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="URL",
                        help="store URL or path: sqlite:///evals.db, postgresql://..., jsonl:///evals.jsonl, "
                             "or a file path (default: $JUDGEHOOKS_DB or ./judgehooks.db)")


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent-id", metavar="ID", help="only records of this agent id")
    parser.add_argument("--team-id", metavar="ID", help="only records of this team id")
    parser.add_argument("--evaluator", metavar="NAME", help="only records of this evaluator")


# ---- the commands -------------------------------------------------------------------------------

def report(parser: argparse.ArgumentParser) -> None:
    """Pass rate, score statistics, error and skip rates per agent/team and evaluator, and the worst failures."""
    add_store_argument(parser)
    parser.add_argument("--since", default="24h", metavar="WHEN", type=since_or_all,
                        help="start of the window: 30m, 24h, 7d, 2w ago, an ISO time, or 'all' (default 24h)")
    parser.add_argument("--until", metavar="WHEN", type=parse_time, help="end of the window (exclusive; default now)")
    add_filter_arguments(parser)
    parser.add_argument("--worst", type=count, default=5, metavar="N",
                        help="show the N lowest-scored failures, newest first among equals (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (stable keys) instead of tables")
    parser.add_argument("--all-versions", action="store_true",
                        help="pool an evaluator's versions into one pass rate (default: one row per version, "
                             "and a warning when the window holds several)")
    parser.add_argument("--outbox", metavar="PATH",
                        help="spill/outbox file whose dead letters to show; default beside a SQLite store, "
                             "else $JUDGEHOOKS_OUTBOX, else the store's own file in the per-user state folder")


def tail(parser: argparse.ArgumentParser) -> None:
    """Print records as they arrive: the last N first, then every new one until Ctrl-C."""
    add_store_argument(parser)
    add_filter_arguments(parser)
    parser.add_argument("--status", choices=("passed", "failed", "error", "skipped"), help="only this status")
    parser.add_argument("-n", "--lines", type=count, default=10, metavar="N",
                        help="print the last N records first (default 10)")
    parser.add_argument("-f", "--follow", action=argparse.BooleanOptionalAction, default=True,
                        help="keep printing new records until Ctrl-C (default); --no-follow prints the last N")
    parser.add_argument("--interval", type=finite, default=1.0, metavar="SECONDS",
                        help="seconds between polls (default 1)")
    parser.add_argument("--lookback", type=finite, default=60.0, metavar="SECONDS",
                        help="re-read this many seconds before the newest record seen, so records stored late "
                             "(batched background writes, retries) are not missed (default 60)")
    parser.add_argument("--json", action="store_true", help="one JSON record per line")


def grade(parser: argparse.ArgumentParser) -> None:
    """Grade a JSONL file of input/output[/expected] cases offline, in bounded chunks, into a store."""
    parser.add_argument("cases", metavar="CASES.jsonl",
                        help="one JSON object per line: input, output, optional expected_output, metadata, id")
    add_store_argument(parser)
    parser.add_argument("--criteria", help="what a good output is (required unless --import-evaluator)")
    parser.add_argument("--model", help="litellm model string (default: $JUDGEHOOKS_MODEL or openai/gpt-5-mini)")
    parser.add_argument("--api-base", help="judge endpoint, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key", default=None,
                        help="judge API key (default: $JUDGEHOOKS_API_KEY, else the provider's own variable)")
    parser.add_argument("--scoring-strategy", choices=("binary", "numeric"), help="default binary")
    parser.add_argument("--threshold", type=int, help="numeric pass mark, 1-10 (default 7)")
    parser.add_argument("--name", help="evaluator name stored on every record")
    parser.add_argument("--concurrency", type=int, help="judge calls at once (default 8)")
    parser.add_argument("--timeout", type=finite, help="seconds per judge call (default 60)")
    parser.add_argument("--retries", type=int, help="retries per case on transient judge errors (default 2)")
    parser.add_argument("--import-evaluator", metavar="MODULE:ATTR",
                        help="grade with an AgentAsJudgeEval defined in code (or a function returning one); "
                             "it brings its own judge settings and store")
    parser.add_argument("--chunk-size", type=int, default=500, metavar="N",
                        help="cases read and graded at a time, bounding memory (default 500)")
    parser.add_argument("--max-line-bytes", type=int, default=MAX_LINE_BYTES, metavar="N",
                        help=f"refuse a line longer than N bytes, without reading it whole (default {MAX_LINE_BYTES}, "
                             "16 MiB)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def resume(parser: argparse.ArgumentParser) -> None:
    """Grade the jobs that processes left in the outbox when they died or timed out at exit."""
    add_store_argument(parser)
    parser.add_argument("--outbox", help="outbox file; default beside a SQLite store, else $JUDGEHOOKS_OUTBOX, "
                                         "else the store's own file in the per-user state folder "
                                         "(~/.local/state/judgehooks on Linux)")
    parser.add_argument("--import", dest="import_", action="append", metavar="MODULE",
                        help="import MODULE first, so its evaluators (with their callbacks) grade their own jobs")
    parser.add_argument("--timeout", type=finite, default=600.0, help="seconds to wait (default 600)")
    parser.add_argument("--concurrency", type=int, default=32)


def grade_sessions(parser: argparse.ArgumentParser) -> None:
    """Grade whole conversations that agno stored (an agno SqliteDb or PostgresDb), once each."""
    parser.add_argument("--agno-db", required=True, metavar="URL",
                        help="the agno db holding the sessions: sqlite:///agno.db or postgresql://user@host/db")
    add_store_argument(parser)
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--agent-id", metavar="ID", help="only this agent's sessions")
    who.add_argument("--team-id", metavar="ID", help="team sessions of this team (default: agent sessions)")
    parser.add_argument("--since", metavar="WHEN", type=parse_time,
                        help="only sessions created since: 30m, 24h, 7d, 2w ago, or an ISO time")
    parser.add_argument("--criteria", required=True, help="what a good conversation is")
    parser.add_argument("--scoring-strategy", choices=("binary", "numeric"), default="binary")
    parser.add_argument("--threshold", type=int, default=7, help="numeric pass mark, 1-10 (default 7)")
    parser.add_argument("--name", help="evaluator name stored on every record (default: derived from the criteria)")
    parser.add_argument("--model", help="litellm model string (default: $JUDGEHOOKS_MODEL or openai/gpt-5-mini)")
    parser.add_argument("--api-base", help="judge endpoint, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key", default=None,
                        help="judge API key (default: $JUDGEHOOKS_API_KEY, else the provider's own variable)")
    parser.add_argument("--budget", type=count, default=100_000, metavar="CHARS",
                        help="longest transcript shown whole, in characters (default 100000)")
    parser.add_argument("--concurrency", type=count, default=8, help="sessions graded at once (default 8)")
    parser.add_argument("--timeout", type=finite, default=60.0, help="seconds per judge call (default 60)")
    parser.add_argument("--redact", metavar="REDACTOR",
                        help="redact every turn before the judge or the store sees it: PII (judgehooks.redact.PII) "
                             "or package.module:name of a function from text to text")


def worker(parser: argparse.ArgumentParser) -> None:
    """Grade the jobs that hooks with broker= publish to Redis (distributed grading)."""
    parser.add_argument("--broker", default=os.environ.get("JUDGEHOOKS_BROKER"),
                        help="Redis URL, e.g. redis://127.0.0.1:6379/0; default $JUDGEHOOKS_BROKER")

    add_store_argument(parser)
    parser.add_argument("--import", dest="import_", action="append", metavar="MODULE",
                        help="import MODULE and grade with the judgehooks evaluators it defines at module level "
                             "(their judge and callbacks); a job for any other evaluator ends as an error record")
    parser.add_argument("--concurrency", type=int, default=32, help="jobs graded at once (default 32)")
    parser.add_argument("--reclaim-after", type=finite, default=30.0,
                        help="seconds a dead worker's job stays idle, and a dead worker's session lease lasts, "
                             "before a live worker takes it (default 30)")
    parser.add_argument("--shutdown-timeout", type=finite, default=30.0,
                        help="on SIGTERM, seconds running jobs get to finish (default 30)")
    parser.add_argument("--rebuild", action="append", metavar="CLASS[,CLASS]",
                        help="also grade jobs of other evaluators of these judgehooks classes (e.g. AgentAsJudgeEval,"
                             "Contains), rebuilt from the job's settings; LLM judges use --judge-model and "
                             "--judge-api-base, never the job's. Needs signed jobs ($JUDGEHOOKS_JOB_KEY)")
    parser.add_argument("--judge-model", default=os.environ.get("JUDGEHOOKS_MODEL"),
                        help="the litellm model rebuilt LLM evaluators grade with; default $JUDGEHOOKS_MODEL")
    parser.add_argument("--judge-api-base", help="the judge server rebuilt LLM evaluators call (default: litellm's "
                                                 "provider settings, e.g. $OPENAI_API_BASE)")
    parser.add_argument("--imported-only", action="store_true",
                        help="grade only with --import'ed evaluators: the default (kept for existing command lines)")
    parser.add_argument("--name", help="consumer name in the Redis group; default host:pid")
    parser.add_argument("--requests-per-minute", type=finite, metavar="N",
                        help="judge calls per minute per judge model, shared by every worker on this Redis, for "
                             "evaluators that set no requests_per_minute of their own (default: no limit)")
    parser.add_argument("--max-deliveries", type=int, default=5, metavar="N",
                        help="a job delivered N times that no worker finished (it kills them) goes to the "
                             "dead-letter stream judgehooks:grading:dead, with an error record (default 5)")


def label(parser: argparse.ArgumentParser) -> None:
    """Keep a person's verdict on a record beside the judge's, or import many from a JSONL file."""
    add_store_argument(parser)
    parser.add_argument("record_id", nargs="?", metavar="RECORD_ID", help="the record's id (report and tail show it)")
    verdict = parser.add_mutually_exclusive_group()
    verdict.add_argument("--pass", dest="passed", action="store_const", const=True, help="the output passes")
    verdict.add_argument("--fail", dest="passed", action="store_const", const=False, help="the output fails")
    parser.add_argument("--score", type=finite, metavar="N", help="your score, on the evaluator's scale")
    parser.add_argument("--note", metavar="TEXT", help="why (kept with the label)")
    parser.add_argument("--by", metavar="NAME", help="who labels (default: your login name)")
    parser.add_argument("--from-file", metavar="FILE",
                        help='labels from JSON lines, each {"record_id"|"run_id", "passed"|"score"} '
                             '(optionally "evaluator", "note", "by"); "-" reads stdin')
    parser.add_argument("--json", action="store_true", help="print the stored label(s) as JSON")


#: `judgehooks review`'s keys (review.HELP, which builds them from the web page's, is held equal to it
#: by tests/cli/test_help_and_spelling.py: spelled out here so --help imports no store)
REVIEW_KEYS = ("keys: p = pass, f = fail, s N = your score N, n = skip, q = quit; text after p, f or s N is kept as "
               "a note (the keys of the web page's review; the older a = agree with the judge, d = disagree and "
               "k = skip still work)")


def review(parser: argparse.ArgumentParser) -> None:
    """Review records one at a time (failed, borderline or sampled) and label them: pass, fail, score, skip."""
    parser.epilog = REVIEW_KEYS
    add_store_argument(parser)
    add_filter_arguments(parser)
    parser.add_argument("--queue", default="routed,failed,borderline", metavar="KINDS",
                        help="which records, comma-separated: routed (live verdicts in doubt, routed to review by "
                             "review_margin, review_sample_rate or jurors that disagree), failed, borderline "
                             "(numeric scores within --margin of the threshold), sample (--sample random graded "
                             "records) (default routed,failed,borderline)")
    parser.add_argument("--margin", type=finite, default=1.0, metavar="POINTS",
                        help="how near the threshold a borderline score is (default 1)")
    parser.add_argument("--sample", type=count, default=10, metavar="N",
                        help="records in the sample queue (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's random seed (default 0)")
    parser.add_argument("--since", type=parse_time, metavar="WHEN", help="only records since: 24h, 7d, an ISO time")
    parser.add_argument("--limit", type=count, default=50, metavar="N", help="review at most N records (default 50)")
    parser.add_argument("--by", metavar="NAME", help="who labels (default: your login name)")


def calibrate(parser: argparse.ArgumentParser) -> None:
    """Compare a judge with human labels: agreement, kappa, confusion matrix, corrected pass rate."""
    add_store_argument(parser)
    parser.add_argument("--evaluator", required=True, metavar="NAME", help="the evaluator to calibrate")
    parser.add_argument("--evaluator-version", metavar="V", help="its version (default: the newest record's)")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's random seed (default 0)")
    parser.add_argument("--resamples", type=count, default=2000, metavar="N",
                        help="bootstrap resamples for the kappa interval (default 2000)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def shadow_report(parser: argparse.ArgumentParser) -> None:
    """Say whether a Shadow's candidate beats the live agent: wins, losses, ties, win rate, sign test, decision."""
    add_store_argument(parser)
    parser.add_argument("--name", required=True, metavar="NAME", help="the Shadow's name (its records' evaluator)")
    parser.add_argument("--evaluator-version", metavar="V",
                        help="the Shadow version to report (default: the newest record's)")
    parser.add_argument("--by", action="append", metavar="KEY",
                        help="segment by this record field (agent_id, agent_name, team_id, user_id, session_id) or "
                             "run metadata key; repeat for several (default: agent_id and user_id)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def judge_health(parser: argparse.ArgumentParser) -> None:
    """A judge's health checks (golden-set kappa, canaries caught), newest first; exit 1 when the last failed."""
    add_store_argument(parser)
    parser.add_argument("--evaluator", required=True, metavar="NAME", help="the evaluator whose health to show")
    parser.add_argument("--check", metavar="MODULE:ATTR",
                        help="first run one health check of the evaluator MODULE defines (its golden= and "
                             "canaries=), stored in its own store (give the same --store)")
    parser.add_argument("--limit", type=count, default=20, metavar="N", help="checks shown (default 20)")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")


def export(parser: argparse.ArgumentParser) -> None:
    """Write stored records (failures by default) as test cases: JSONL to grade again, or a pydantic-evals dataset."""
    add_store_argument(parser)
    add_filter_arguments(parser)
    parser.add_argument("--status", default=None, choices=("passed", "failed", "error", "skipped"),
                        help="which records become cases (default failed; with --labelled, any)")
    parser.add_argument("--labelled", action="store_true",
                        help="only records people labelled, each with their majority verdict as \"passed\": a "
                             "golden set for a judge's health check (golden=)")
    parser.add_argument("--since", type=parse_time, metavar="WHEN", help="only records since: 24h, 7d, an ISO time")
    parser.add_argument("--limit", type=count, metavar="N", help="at most N cases, newest first (default all)")
    parser.add_argument("--format", choices=FORMATS, default="jsonl",
                        help="jsonl: cases `judgehooks grade` and run(cases=...) read; pydantic-evals: a dataset "
                             "file pydantic_evals.Dataset.from_file loads (default jsonl)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")


def consistency(parser: argparse.ArgumentParser) -> None:
    """Re-judge a sample of records K times: how often the verdict flips, how much the score moves."""
    add_store_argument(parser)
    parser.add_argument("--evaluator", required=True, metavar="NAME",
                        help="the evaluator whose records to re-judge")
    parser.add_argument("--evaluator-version", metavar="V", help="its version (default: the newest record's)")
    parser.add_argument("--sample", type=count, default=20, metavar="N", help="records to re-judge (default 20)")
    parser.add_argument("--repeats", type=count, default=3, metavar="K", help="re-judgments per record (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's random seed (default 0)")
    parser.add_argument("--import", dest="import_", metavar="MODULE",
                        help="re-judge with the evaluator named NAME that MODULE defines at module level (any "
                             "kind: Rubric, ScorerEval, a function), instead of rebuilding an LLM judge from the "
                             "records")
    parser.add_argument("--model", help="the judge's litellm model string (default: $JUDGEHOOKS_MODEL or "
                                        "openai/gpt-5-mini); criteria, mode, threshold and guidelines come from the "
                                        "records")
    parser.add_argument("--api-base", help="judge endpoint, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key", help="judge API key (default: the provider's environment variable)")
    parser.add_argument("--temperature", type=finite, help="the judge's sampling temperature, as it graded the records")
    parser.add_argument("--timeout", type=finite, default=60.0, help="seconds per judge call (default 60)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def doctor(parser: argparse.ArgumentParser) -> None:
    """Check that each evaluator can grade: its store, its judge's key, endpoint and verdicts, with fixes."""
    parser.add_argument("--import", dest="import_", action="append", metavar="MODULE",
                        help="the module(s) that build your evaluators, agents or teams (e.g. myapp.evals); "
                             "without it, only the store is checked")
    add_store_argument(parser)
    parser.add_argument("--timeout", type=finite, default=20.0, metavar="SECONDS",
                        help="longest wait for each judge's answer (default 20, or the evaluator's own if shorter)")


def ui(parser: argparse.ArgumentParser) -> None:
    """Serve the web pages over a store: overview, records, review, calibration, sessions."""
    add_store_argument(parser)
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; any other needs --token)")
    parser.add_argument("--port", type=count, default=8765, help="port (default 8765; 0 picks a free one)")
    parser.add_argument("--read-only", action="store_true", help="no review page: nothing is written to the store")
    parser.add_argument("--token", metavar="TOKEN",
                        help=f"every request must show this access token (default: ${TOKEN_ENV}); needed "
                             "to listen beyond this machine")
    parser.add_argument("--trace-url", metavar="URL",
                        help="link trace ids to this address, with {trace_id} in it "
                             "(e.g. http://localhost:6006/trace/{trace_id})")
    parser.add_argument("--name-failures", metavar="MODEL",
                        help="a litellm model string that names the largest groups of the failure modes page "
                             "(its provider's variables give the key and address; default: groups are named by "
                             "their words, no model is asked)")


def optimize(parser: argparse.ArgumentParser) -> None:
    """Search for better agent instructions on failed cases, measured on held-out ones (needs judgehooks[optimize])."""
    parser.add_argument("--import-agent", required=True, metavar="MODULE:ATTR",
                        help="the agno Agent or Team (or a function returning one) whose instructions to improve; "
                             "it is copied for every run, never changed")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cases", metavar="FILE", help="a JSONL file of cases (`judgehooks export` writes one)")
    source.add_argument("--from-store", metavar="URL",
                        help="take the cases from this store's records: a store URL or path, as --store takes "
                             "(sqlite:///evals.db, postgresql://..., or a file path)")
    parser.add_argument("--status", default="failed", choices=("passed", "failed", "error"),
                        help="with --from-store: which records become cases (default failed)")
    parser.add_argument("--since", type=parse_time, metavar="WHEN",
                        help="with --from-store: only records since: 24h, 7d, an ISO time")
    parser.add_argument("--agent-id", metavar="ID",
                        help="with --from-store: only this agent's records (default: the agent's id, when it has one)")
    parser.add_argument("--import-evaluator", action="append", required=True, metavar="MODULE:ATTR",
                        help="an evaluator that grades the answers, defined in code (repeat for several)")
    parser.add_argument("--reflection-model", required=True, metavar="MODEL",
                        help="the model that proposes instructions: a litellm model string")
    parser.add_argument("--api-base", help="the reflection model's endpoint, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key", default=None,
                        help="the reflection model's API key (default: $JUDGEHOOKS_API_KEY, else the provider's)")
    parser.add_argument("--max-metric-calls", type=count, default=150, metavar="N",
                        help="agent runs on training cases the search may make (default 150)")
    parser.add_argument("--max-calls", type=count, metavar="N", help="cap on every model call of the whole run")
    parser.add_argument("--max-cost-usd", type=finite, metavar="USD", help="cap on the whole run's cost")
    parser.add_argument("--holdout", type=finite, default=0.3, help="share of cases held out (default 0.3)")
    parser.add_argument("--seed", type=int, default=0, help="how cases are split and sampled (default 0)")
    parser.add_argument("--concurrency", type=count, default=4, metavar="N", help="cases run at once (default 4)")
    parser.add_argument("--run-dir", metavar="DIR", help="keep the search's state here; the same command resumes it")
    parser.add_argument("--out", metavar="FILE", help="write the best instructions to FILE")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


#: command -> the module that runs it (`run(args) -> int`), imported only when the command runs
COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], str]] = {
    "report": (report, "judgehooks._cli.report"),
    "tail": (tail, "judgehooks._cli.tail"),
    "grade": (grade, "judgehooks._cli.grade"),
    "resume": (resume, "judgehooks._cli.resume"),
    "grade-sessions": (grade_sessions, "judgehooks._cli.sessions"),
    "worker": (worker, "judgehooks._cli.worker"),
    "label": (label, "judgehooks._cli.label"),
    "review": (review, "judgehooks._cli.review"),
    "calibrate": (calibrate, "judgehooks._cli.calibrate"),
    "export": (export, "judgehooks._cli.export"),
    "consistency": (consistency, "judgehooks._cli.consistency"),
    "doctor": (doctor, "judgehooks._cli.doctor"),
    "ui": (ui, "judgehooks._cli.ui"),
    "optimize": (optimize, "judgehooks._cli.optimize"),
    "shadow-report": (shadow_report, "judgehooks._cli.shadowreport"),
    "judge-health": (judge_health, "judgehooks._cli.judgehealth"),
}

_FILTERED = ("report", "tail", "review", "export")
#: command -> {a spelling that was replaced: the one spelling now}; accepted, never listed in --help
ALIASES: dict[str, dict[str, str]] = {
    **{command: {"--agent": "--agent-id", "--team": "--team-id"} for command in _FILTERED},
    "grade": {"--evaluator": "--import-evaluator"},
    "optimize": {"--agent": "--import-agent", "--evaluator": "--import-evaluator"},
    "label": {"--import": "--from-file"},
    "calibrate": {"--version": "--evaluator-version"},
    "consistency": {"--version": "--evaluator-version"},
}


def respell(argv: Sequence[str]) -> list[str]:
    """`argv` with the replaced spellings of its command's options (`ALIASES`) written the one way,
    ``--old VALUE`` and ``--old=VALUE`` alike, up to a ``--`` that ends the options."""
    args = list(argv)
    command = next((i for i, token in enumerate(args) if not token.startswith("-")), None)
    if command is None:
        return args
    aliases = ALIASES.get(args[command], {})
    for i in range(command + 1, len(args)):
        token = args[i]
        if token == "--":
            break
        old, eq, value = token.partition("=")
        if old in aliases:
            args[i] = aliases[old] + eq + value
    return args


def summary(command: str) -> str:
    """The command's one-line help: its options function's docstring's first line."""
    doc = COMMANDS[command][0].__doc__ or ""
    return doc.strip().splitlines()[0]
