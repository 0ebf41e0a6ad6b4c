"""WindowedAlert: one alert per incident when an agent's pass rate drops, fed every record (``on_record``).

Per (agent or team, evaluator) it keeps the last ``last_n`` evaluations and/or those of the last
``minutes``; when at least ``min_evaluations`` were graded and passed / graded falls below
``threshold``, it fires ``notify`` once. It re-arms only when the pass rate recovers to the threshold,
and never fires again for the same key within ``cooldown`` seconds, so one incident is one alert.
Judge errors are not failures: they are counted beside the pass rate, never in it. Skipped
(sampled out, shed) records are ignored.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .._base.callbacks import wrap_callback
from .._base.log import log
from .._base.record import EvalRecord
from .._base.validate import check_finite


@dataclass(frozen=True, slots=True)
class QualityAlert:
    """What a WindowedAlert reports: whose pass rate fell, how far, over which window."""

    evaluator: str
    agent_id: str | None
    team_id: str | None
    agent_name: str | None
    team_name: str | None
    pass_rate: float
    threshold: float
    graded: int
    failed: int
    errors: int
    window: str
    last_run_id: str | None
    last_reason: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "quality_alert", **asdict(self)}


@dataclass
class _Window:
    entries: deque[tuple[float, str]] = field(default_factory=deque)  # (time, status)
    armed: bool = True
    last_fired: float | None = None


class WindowedAlert:
    """Pass-rate alert over a sliding window, per (agent or team, evaluator). Pass it as ``on_record``.

    ``notify`` is any callback taking a `QualityAlert` (sync or async), e.g. a `WebhookNotifier`,
    `SlackNotifier` or `LogNotifier`. ``clock`` (seconds) is for tests."""

    def __init__(self, notify: Callable[[QualityAlert], Any], *, threshold: float = 0.8, last_n: int | None = 50,
                 minutes: float | None = None, min_evaluations: int = 10, cooldown: float = 900.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
            raise ValueError(f"threshold must be a pass rate in (0, 1], got {threshold!r}")
        if last_n is None and minutes is None:
            raise ValueError("give last_n (evaluations) and/or minutes: the window needs a bound")
        if last_n is not None and (isinstance(last_n, bool) or not isinstance(last_n, int) or last_n < 1):
            raise ValueError(f"last_n must be an integer >= 1 or None, got {last_n!r}")
        if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, (int, float))
                                    or minutes <= 0):
            raise ValueError(f"minutes must be a number > 0 or None, got {minutes!r}")
        if isinstance(min_evaluations, bool) or not isinstance(min_evaluations, int) or min_evaluations < 1:
            raise ValueError(f"min_evaluations must be an integer >= 1, got {min_evaluations!r}")
        if last_n is not None and min_evaluations > last_n:
            raise ValueError(f"min_evaluations ({min_evaluations}) cannot exceed last_n ({last_n}): "
                             "the alert could never fire")
        if isinstance(cooldown, bool) or not isinstance(cooldown, (int, float)) or cooldown < 0:
            raise ValueError(f"cooldown must be a number of seconds >= 0, got {cooldown!r}")
        check_finite("minutes", minutes)
        check_finite("cooldown", cooldown)
        self._notify = wrap_callback("notify", notify)
        self.notify, self.threshold, self.last_n, self.minutes = notify, float(threshold), last_n, minutes
        self.min_evaluations, self.cooldown, self._clock = min_evaluations, float(cooldown), clock
        self._lock = threading.Lock()
        self._windows: dict[tuple[str | None, str], _Window] = {}
        self.fired = 0

    def __repr__(self) -> str:
        return (f"WindowedAlert(threshold={self.threshold}, last_n={self.last_n}, minutes={self.minutes}, "
                f"cooldown={self.cooldown}, notify={self.notify!r})")

    async def __call__(self, record: EvalRecord) -> None:
        """Count one record; fire the notifier if this record starts an incident."""
        alert = self.observe(record)
        if alert is not None:
            log.info("quality_alert_fired", evaluator=alert.evaluator, agent_id=alert.agent_id,
                        team_id=alert.team_id, pass_rate=alert.pass_rate, graded=alert.graded, errors=alert.errors)
            await self._notify(alert)

    def observe(self, record: EvalRecord) -> QualityAlert | None:
        """Pure bookkeeping (no I/O): add the record to its window; the alert to send, if any."""
        if record.status == "skipped":
            return None
        now = self._clock()
        key = (record.agent_id or record.team_id, record.evaluator)
        with self._lock:
            window = self._windows.setdefault(key, _Window(deque(maxlen=self.last_n)))
            window.entries.append((now, record.status))
            if self.minutes is not None:
                while window.entries and window.entries[0][0] < now - self.minutes * 60:
                    window.entries.popleft()
            statuses = [status for _, status in window.entries]
            passed, failed, errors = statuses.count("passed"), statuses.count("failed"), statuses.count("error")
            graded = passed + failed
            if graded < self.min_evaluations:
                return None
            rate = passed / graded
            if rate >= self.threshold:
                window.armed = True
                return None
            cooling = window.last_fired is not None and now - window.last_fired < self.cooldown
            if not window.armed or cooling:
                return None
            window.armed, window.last_fired = False, now
            self.fired += 1
        span = [f"last {self.last_n} evaluations"] if self.last_n is not None else []
        span += [f"last {self.minutes:g} minutes"] if self.minutes is not None else []
        return QualityAlert(
            evaluator=record.evaluator, agent_id=record.agent_id, team_id=record.team_id,
            agent_name=record.agent_name, team_name=record.team_name, pass_rate=round(rate, 4),
            threshold=self.threshold, graded=graded, failed=failed, errors=errors, window=" and ".join(span),
            last_run_id=record.run_id, last_reason=record.reason)
