"""Evaluator: the base every judgehooks evaluator shares. Override ONE method, `evaluate(ctx)`.

An evaluator is a small dataclass that declares only its own settings, as pydantic_evals'
evaluators are (and agno's own `AgentAsJudgeEval`):

    @dataclass
    class MaxWords(Evaluator):
        limit: int

        def evaluate(self, ctx):                   # sync runs on a worker thread; async is awaited
            return len(ctx.output.split()) <= self.limit

    MaxWords(50, name="short", store=SQLiteStore("evals.db"), on_fail=page, run_in_background=True)

The deployment settings every evaluator also takes (store, callbacks, background grading,
sampling, gates: `Deployment`) are keyword-only fields it inherits, so its constructor, help(),
IDEs and type checkers take them as they take its own. Construction ends with one step,
`_deploy`: the settings are validated together into a `HookSettings`, kept apart in the hook
shell (`judgehooks._hooks`), which answers agno's `post_check` / `async_post_check` and offline
`run()` / `arun()`; from then on the evaluator's deployment attributes read the settings, and
`configure` changes them. A hand-written `__init__(self, ..., **hook)` that ends with
`super().__init__(**hook)` works too (type its keywords with ``Unpack[DeploymentKeywords]``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Unpack

from agno.eval.base import BaseEval

from .._base.context import EvalContext
from .._base.outcome import Outcome, run_evaluator
from .._base.record import EvalRecord, Mode
from .._base.result import AgentAsJudgeResult
from .._base.validate import check_finite, check_name
from .._grading.pipeline import Pipeline
from .._hooks.agno_compat import MARKER, SharedAcrossCopies
from .._hooks.deployment import Deployment, DeploymentKeywords
from .._hooks.settings import HookSettings
from .._hooks.shell import HookShell
from .._runtime import runtime
from . import spec as _spec
from .fields import DeploymentField, deploys, own_fields, plain, stable_name
from .version import NOT_VERDICT, Version


def _then_deploy(method: Callable[..., None]) -> Callable[..., None]:
    """A subclass's own ``__init__`` or ``__post_init__``, followed by the deployment step when it is
    the instance's outermost one (a subclass calling ``super().__post_init__()`` deploys once, last)."""

    @functools.wraps(method)
    def then_deploy(self: Evaluator, *args: Any, **kwargs: Any) -> None:
        method(self, *args, **kwargs)
        if getattr(type(self), method.__name__) is not then_deploy or "_shell" in self.__dict__:
            return
        if method.__name__ == "__post_init__":
            self._deploy()
        else:  # a hand-written __init__ that never reached Evaluator's
            raise TypeError(f"{type(self).__name__}.__init__ must call super().__init__(**hook) after setting "
                            "its own settings (it sets up the store, callbacks and background grading)")

    return then_deploy


@dataclass(eq=False, kw_only=True)
class Evaluator(SharedAcrossCopies, BaseEval, Deployment):
    """Base of every judgehooks evaluator; put instances in an agno Agent's or Team's ``post_hooks``.

    Subclasses override ``evaluate(ctx)`` returning a bool, a number (held to ``threshold``), a
    dict with passed/score/reason/details, or an `Outcome`. An exception raised there, or a return
    value that is none of these, becomes an ``error`` record, never a failure.
    """

    #: the record's evaluator name; default: one derived from the class and its settings
    name: str | None = None
    #: what numeric scores are held to; setting it makes the evaluator numeric
    threshold: float | None = None

    # mode, scale and needs_tools are class defaults that an instance may set for itself when its
    # settings decide them (type checkers forbid that on a ClassVar: a narrow type: ignore[misc] there)
    #: "binary" or "numeric" (with a threshold)
    mode: ClassVar[Mode] = "binary"
    #: the full mark of this evaluator's scores; composites divide by it to mix evaluators
    scale: ClassVar[float] = 1.0
    #: whether evaluate() reads ctx.tool_calls (the snapshot skips them otherwise); checks that
    #: only read the text turn it off to keep the hook path short
    needs_tools: ClassVar[bool] = True
    #: whether this is a cheap deterministic check that can judge the text streamed so far: one a
    #: prefix of the answer fails only when something in that prefix is wrong (text that must not
    #: appear). `judgehooks.stream` runs such checks at its checkpoints (docs/how-to/gates.md)
    prefix_check: ClassVar[bool] = False
    #: whether the live verdicts in doubt go to the review queue (`review_margin`, `review_sample_rate`,
    #: jurors that disagree); a `Shadow`'s comparisons do not
    routes_to_review: ClassVar[bool] = True
    #: what answers agno's hooks (a session evaluator's records turns instead of grading runs)
    shell_type: ClassVar[type[HookShell]] = HookShell

    def __post_init__(self) -> None:
        """A dataclass evaluator validates its own fields here; construction ends with `_deploy`."""
        if type(self).__post_init__ is Evaluator.__post_init__ and "_shell" not in self.__dict__:
            self._deploy()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _spec.register(cls)
        for method in ("__init__", "__post_init__"):  # construction ends with the deployment step
            if method in cls.__dict__:
                setattr(cls, method, _then_deploy(cls.__dict__[method]))
        # Evaluators are configuration plus shared resources: identity, not field, equality (a
        # dataclass would otherwise compare fields and make instances unhashable).
        for method in ("__eq__", "__hash__"):
            if method not in cls.__dict__:
                setattr(cls, method, getattr(object, method))

    def _deploy(self) -> None:
        """The last step of construction: validate the deployment settings together, then the hook
        shell (the store, pipeline and dispatcher it builds come on first use, or now for background
        grading)."""
        self._check_common()
        settings = HookSettings(**self.__dict__.pop("_deployment", {}))
        self._prepare(settings)
        self._threshold_mode = type(self).mode == "binary" and "mode" not in vars(self)
        self._derive_mode()
        self.evaluator_name: str = self.name or self.default_name()
        self._new_version()
        self._shell = self.shell_type(self, settings, needs_tools=self.needs_tools, spec=self.spec())

    def configure(self, **changes: Unpack[DeploymentKeywords]) -> None:
        """Change deployment settings after construction, together: they are checked as at
        construction and take effect from the next run, or none of them does when one can no longer
        take effect (``store`` once the store was built, the queue settings once background grading
        started; each setting's `changes` says when), raising and naming it."""
        for name in changes:
            if not deploys(type(self), name):
                raise TypeError(f"{type(self).__name__}.configure() takes deployment settings; {name!r} is not one "
                                f"(assign the evaluator's own settings: ev.{name} = ...)")
        self._shell.reconfigure(changes, self._rebuild_judge)

    def _check_common(self) -> None:
        check_name(self.name)
        threshold = self.threshold
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
            raise TypeError(f"threshold must be a number or None, got {threshold!r}")
        check_finite("threshold", threshold)

    def _derive_mode(self) -> None:
        """Evaluators whose class is binary grade numerically once they have a threshold."""
        if self.__dict__.get("_threshold_mode"):
            self.mode = "numeric" if self.pass_threshold is not None else "binary"  # type: ignore[misc]

    # ---- settings assigned after construction (agno reads its fields at every run) ------------

    def __setattr__(self, name: str, value: Any) -> None:
        """An own setting assigned after construction takes effect from the next run: it is checked
        as at construction, and what derives from it (the judge, the name, the version) follows.
        (A deployment setting's attribute is a `DeploymentField`: `configure`.)"""
        shell: HookShell | None = self.__dict__.get("_shell")
        if shell is not None and not self.__dict__.get("_rebuilding") and name in own_fields(type(self)):
            self._assign_setting(shell, name, value)
        else:
            object.__setattr__(self, name, value)

    def _assign_setting(self, shell: HookShell, name: str, value: Any) -> None:
        if name == "name" and shell.dispatching:
            raise dataclasses.FrozenInstanceError(
                "cannot change 'name' after background grading started: queued jobs and the outbox are "
                "filed under the evaluator's name; construct the evaluator with name=... instead")
        missing = object()
        old = self.__dict__.get(name, missing)
        object.__setattr__(self, name, value)
        try:
            self._rebuild(shell, renamed=name == "name")
        except BaseException:
            if old is missing:
                object.__delattr__(self, name)
            else:
                object.__setattr__(self, name, old)
            self._rebuild(shell, renamed=name == "name")
            raise

    def _rebuild(self, shell: HookShell, *, renamed: bool) -> None:
        """Check the settings as at construction, then rebuild what derives from them."""
        self.__dict__["_rebuilding"] = True
        try:
            self.check()
            self._check_common()
            self._prepare(shell.settings)
            self._derive_mode()
            if renamed:
                self.evaluator_name = self.name or self.default_name()
            self._new_version()
            shell.respec(self.spec())
        finally:
            self.__dict__["_rebuilding"] = False

    def _rebuild_judge(self, settings: HookSettings) -> None:
        """A deployment setting changed before anything was built (e.g. run_in_background):
        LLM evaluators choose their judge again (in a helper process or not)."""
        self.__dict__["_rebuilding"] = True
        try:
            self._prepare(settings)
            self._new_version()
        finally:
            self.__dict__["_rebuilding"] = False

    def check(self) -> None:
        """Validate this evaluator's own settings, at construction and after an assignment: a
        dataclass evaluator's ``__post_init__`` by default."""
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:
            post_init()

    def _prepare(self, settings: HookSettings) -> None:
        """Called once the settings are known, before the shell: LLM evaluators build their judge
        here (in a helper process when this process grades in the background)."""

    # ---- what a subclass provides ---------------------------------------------------------------

    async def evaluate(self, ctx: EvalContext) -> Any:
        """Judge one run from its snapshot. Override this (sync or async)."""
        raise NotImplementedError(f"{type(self).__name__} must override evaluate(ctx)")

    @property
    def pass_threshold(self) -> float | None:
        """What scores are held to, and the record's threshold."""
        return self.threshold

    def settings(self) -> dict[str, Any] | None:
        """This evaluator's own settings as JSON data, derived from its dataclass fields (as
        pydantic_evals derives its arguments); None when one is code or an object."""
        if not dataclasses.is_dataclass(self):
            return None
        found = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                 if f.init and f.name not in ("name", "threshold") and not deploys(type(self), f.name)}
        return found if plain(found) else None

    def default_name(self) -> str:
        """The record's evaluator name when none is given: stable across processes."""
        kind = type(self).__name__.lower()
        settings = self.settings()
        return stable_name(kind, settings) if settings is not None else kind

    def version_inputs(self) -> dict[str, Any]:
        """What decides the verdicts besides class, mode and threshold (see `version`): by default the
        own settings but the name and those saying how a verdict is reached or shown; LLM evaluators
        add their prompts and model."""
        names = [f.name for f in dataclasses.fields(self) if f.init] if dataclasses.is_dataclass(self) \
            else [k for k in vars(self) if not k.startswith("_")]  # a hand-written __init__: public attributes
        return {n: getattr(self, n) for n in names if n not in NOT_VERDICT and not deploys(type(self), n)}

    def _new_version(self) -> None:
        self.__dict__["_version"] = Version(self)

    @property
    def evaluator_version(self) -> str:
        """A short stable hash of what decides this evaluator's verdicts, on every record: pass rates
        of different criteria, prompts, models or thresholds are never pooled unnoticed."""
        return str(self.__dict__["_version"].current(self))

    def record_metadata(self) -> Mapping[str, Any]:
        """Extra metadata this evaluator adds to each record (e.g. the judge's criteria)."""
        return {}

    def spec(self) -> dict[str, Any] | None:
        """What `judgehooks resume` needs to rebuild this evaluator in another process, or None
        when it is built from user code (functions, models, child evaluators): then resume needs
        ``--import`` with the module that constructs it."""
        settings = self.settings()
        if settings is None or not type(self).__module__.startswith("judgehooks."):
            return None
        return {"class": type(self).__name__,
                "settings": {**settings, "name": self.evaluator_name, "threshold": self.pass_threshold}}

    @property
    def evaluator(self) -> str:
        """The record's evaluator name (`evaluator_name`)."""
        return self.evaluator_name

    async def assess(self, ctx: EvalContext) -> Outcome:
        """Run `evaluate` and read its result (`run_evaluator`). Never raises."""
        return await run_evaluator(self, ctx)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.evaluator_name!r})"

    # ---- what the hook shell owns -------------------------------------------------------------

    @property
    def _pipeline(self) -> Pipeline:
        return self._shell.wiring.pipeline

    @property
    def hook_settings(self) -> HookSettings:
        """The deployment settings, validated (`configure` changes them)."""
        return self._shell.settings

    def check_health(self) -> EvalRecord:
        """Grade the `golden=` set and the `canaries=` now (as the background check does when a new
        version is first used and every `health_every`), store the health record and return it: failed
        when the kappa against the labels is below `golden_min_kappa` or a canary passed (`on_fail` is
        called), error when no case could be graded. ValueError when the evaluator has neither."""
        return runtime.call(self._shell.health.check)

    async def acheck_health(self) -> EvalRecord:
        """`check_health` for async callers."""
        return await runtime.wait(runtime.submit(self._shell.health.check))

    def stats(self) -> dict[str, Any]:
        """This evaluator's counters: sampling, and the background queue when there is one."""
        return self._shell.stats()

    # ---- agno hook shells -------------------------------------------------------------------

    def pre_check(self, run_input: Any) -> None:
        raise ValueError(f"judgehooks.{type(self).__name__} grades finished runs: put it in post_hooks, "
                         "not pre_hooks")

    async def async_pre_check(self, run_input: Any) -> None:
        self.pre_check(run_input)

    def post_check(self, run_output: Any, agent: Any = None, team: Any = None, user_id: str | None = None,
                   metadata: Mapping[str, Any] | None = None, run_context: Any = None) -> None:
        """agno's sync post hook: grade this run inline (then gate it), or persist it and hand it off.
        agno passes `run_context` because it is named here: the run's session_state is read from it."""
        self._shell.post_check(run_output, agent, team, user_id, metadata, run_context)

    async def async_post_check(self, run_output: Any, agent: Any = None, team: Any = None,
                               user_id: str | None = None, metadata: Mapping[str, Any] | None = None,
                               run_context: Any = None) -> None:
        """agno's async post hook. Grading runs on the judgehooks loop; the caller's loop only awaits."""
        await self._shell.async_post_check(run_output, agent, team, user_id, metadata, run_context)

    def __call__(self, run_output: Any, agent: Any = None, team: Any = None, user_id: str | None = None,
                 metadata: Mapping[str, Any] | None = None, run_context: Any = None) -> None:
        """The hook itself, for an agno call that skips agno's hook normaliser: `continue_run` as an
        agent's or team's first call (a run resumed after a restart) calls this object as it stands
        in `post_hooks` (``_hooks/agno_compat.py``, item 6). The sync `post_check`."""
        self.post_check(run_output, agent, team, user_id, metadata, run_context)

    # ---- agno's Scorer protocol --------------------------------------------------------------

    async def ascore(self, run: Any, expected: Any = None) -> Any:
        """agno's `Scorer` protocol: grade one agno run (RunOutput or TeamRunOutput) and return agno's
        ``Score`` (value in [0, 1], passed, reason, detail naming the record), so
        ``agno.eval.Case(scorer=evaluator)`` and agno's ``run_cases`` grade with it. The verdict is
        stored like any other; a run with no verdict (error, skipped) raises `EvaluatorError`."""
        return await self._shell.ascore(run, expected)

    # ---- offline grading --------------------------------------------------------------------

    def run(self, *, input: str | None = None, output: Any = None, cases: Sequence[Mapping[str, Any]] | None = None,
            expected_output: str | None = None, print_summary: bool = False, print_results: bool = False,
            run_metrics: Any = None) -> AgentAsJudgeResult:
        """Grade one input/output pair or a batch of `cases` (dicts with input, output and optionally
        expected_output, metadata and session_state), concurrently up to `max_concurrency`. Raises
        StoreError (with `.result`) only after every case is graded, if the store could not take the records."""
        return self._shell.run(input, output, cases, expected_output, print_summary, print_results, run_metrics)

    async def arun(self, *, input: str | None = None, output: Any = None,
                   cases: Sequence[Mapping[str, Any]] | None = None, expected_output: str | None = None,
                   print_summary: bool = False, print_results: bool = False, run_metrics: Any = None
                   ) -> AgentAsJudgeResult:
        """`run` for async callers; the grading itself runs on the judgehooks loop."""
        return await self._shell.arun(input, output, cases, expected_output, print_summary, print_results,
                                      run_metrics)


setattr(Evaluator, MARKER, True)
# Each deployment setting, an attribute that reads and reconfigures the hook settings once they exist.
for _field in dataclasses.fields(Deployment):
    setattr(Evaluator, _field.name, DeploymentField(_field.name))
