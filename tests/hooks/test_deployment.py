"""Each deployment setting is defined once (`judgehooks._hooks.deployment`), and that definition
drives its check, when it can change, and the job spec's one encoder and one decoder."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json

import pytest

import judgehooks
from judgehooks import Budget, MemoryStore, Regex
from judgehooks._hooks.deployment import SETTINGS, Deployment, decode_deployment, job_spec
from judgehooks._hooks.settings import HookSettings


def test_every_setting_is_one_field_with_its_docstring_and_a_known_change_rule():
    tree = ast.parse(inspect.getsource(Deployment))
    body = tree.body[0].body  # type: ignore[attr-defined]
    documented = [node.target.id for node, after in zip(body, body[1:], strict=False)
                  if isinstance(node, ast.AnnAssign) and isinstance(after, ast.Expr)
                  and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)]
    assert documented == list(SETTINGS) == [f.name for f in dataclasses.fields(Deployment)]
    assert {f.metadata["changes"] for f in SETTINGS.values()} <= {"live", "dispatch", "build"}


def test_each_setting_is_checked_by_its_own_check_naming_it():
    bad = {"max_calls": 0, "per": "week", "overload": "sometimes", "sample_rate": 2, "repair": -1,
           "gate_on_skip": "maybe", "budget": " ", "redact": "PII", "on_drop": "page me", "fallback": "",
           "gate_latency_s": float("nan"), "gate_on_timeout": "open"}
    for name, value in bad.items():
        with pytest.raises((ValueError, TypeError), match=name):
            HookSettings(**{name: value})


def test_the_encoder_writes_the_settings_that_travel_and_the_decoder_reads_them_back(tmp_path):
    ledger = tmp_path / "spend.db"
    settings = HookSettings(store=MemoryStore(), max_calls=3, budget="team", spend_ledger=ledger,
                            requests_per_minute=60, sample_rate=0.5, on_fail=print)
    spec = job_spec({"class": "Regex", "settings": {"pattern": "x"}}, settings)
    carried = json.loads(json.dumps(spec))["deployment"]
    # only what travels, not at its default (per="hour" is), paths as text
    assert carried == {"max_calls": 3, "budget": "team", "spend_ledger": str(ledger), "requests_per_minute": 60}
    assert decode_deployment(carried, same_machine=True) == carried
    # a job from elsewhere never names a file on this machine
    assert decode_deployment(carried, same_machine=False) == {k: v for k, v in carried.items() if k != "spend_ledger"}


def test_the_decoder_takes_nothing_but_settings_that_travel_from_a_job():
    """A job is data: its `deployment` may not choose where records go, a broker, or callbacks."""
    hostile = {"store": "postgresql://evil@attacker/x", "broker": "redis://attacker", "outbox": "/etc/passwd",
               "on_fail": "os.system", "max_calls": 1, "surprise": True}
    assert decode_deployment(hostile, same_machine=True) == {"max_calls": 1}
    assert decode_deployment(["max_calls", 1], same_machine=True) == {}


def test_rebuild_and_a_worker_decode_with_the_one_decoder(tmp_path):
    from judgehooks._evaluators.spec import JobRebuild, rebuild

    ledger = str(tmp_path / "spend.db")
    app = Regex("x", name="capped", store=MemoryStore(), max_calls=2, spend_ledger=ledger)
    spec = json.loads(json.dumps(app._shell._spec))
    resumed = rebuild(spec, store=MemoryStore(), run_in_background=False)
    worker = JobRebuild(allow=frozenset({"Regex"}))(spec, store=MemoryStore(), run_in_background=False, spill=False)
    assert (resumed.hook_settings.max_calls, resumed.hook_settings.spend_ledger) == (2, ledger)
    assert (worker.hook_settings.max_calls, worker.hook_settings.spend_ledger) == (2, None)
    judgehooks.drain(10)


@pytest.mark.parametrize(("name", "value", "changes"), [
    ("on_error", print, "live"),  # read per run
    ("max_queue", 5, "dispatch"),  # read by a dispatcher only: none runs inline
    ("max_calls", 5, "build"),  # the pipeline's caps were built with the store
])
def test_when_a_setting_can_change_is_its_definitions(name, value, changes):
    judge = Regex("a", store=MemoryStore())
    judge.run(input="q", output="a")  # builds the store and pipeline
    assert SETTINGS[name].metadata["changes"] == changes
    if changes == "build":
        with pytest.raises(AttributeError, match=f"cannot change {name!r} after its store was built"):
            judge.configure(**{name: value})
    else:
        judge.configure(**{name: value})
        assert getattr(judge.hook_settings, name) == value


# ---- assignment is explicit ----------------------------------------------------------------------


def test_assigning_a_deployment_setting_is_refused_naming_configure():
    check = Regex("x", store=MemoryStore(), max_calls=3)
    with pytest.raises(AttributeError, match=r"'max_calls' is a deployment setting: change it with "
                                             r"Regex\.configure\(max_calls=\.\.\.\)"):
        check.max_calls = 5
    assert check.max_calls == check.hook_settings.max_calls == 3
    check.configure(max_calls=5)
    assert check.max_calls == check.hook_settings.max_calls == 5


def test_agnos_own_fields_stay_assignable_on_every_evaluator():
    """agno's users assign its evaluator's fields (on_fail, db, print_*, run_in_background): those
    stay assignments, through configure, on a check as on the judge."""
    failed: list[object] = []
    check = Regex("x", store=MemoryStore())
    check.on_fail = failed.append
    check.run(input="q", output="no match")
    assert check.hook_settings.on_fail == failed.append and len(failed) == 1


def test_configure_changes_settings_together_or_not_at_all():
    judge = Regex("a", store=MemoryStore())
    judge.run(input="q", output="a")  # the store is built
    with pytest.raises(AttributeError, match="cannot change 'store'"):
        judge.configure(on_error=print, store=MemoryStore())
    assert judge.hook_settings.on_error is None
    with pytest.raises(ValueError, match="sample_rate"):
        judge.configure(on_error=print, sample_rate=3)
    assert judge.hook_settings.on_error is None


def test_configure_takes_deployment_settings_only():
    with pytest.raises(TypeError, match="'pattern' is not one"):
        Regex("x", store=MemoryStore()).configure(pattern="y")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'max_cost_usd' is not one"):  # a Budget's own limit, not a spend cap
        Budget(max_cost_usd=1.0, store=MemoryStore()).configure(max_cost_usd=2.0)
