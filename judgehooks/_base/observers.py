"""Record observers: a process-wide tap on delivered records (what `judgehooks.testing.capture_records`
listens to). The pipeline's deliver step calls `observers.notify(records)` once per delivery."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from .log import log
from .record import EvalRecord

Observer = Callable[[Sequence[EvalRecord]], object]


class RecordObservers:
    """Functions called with every batch of records delivered in this process. Cheap when there
    are none (the hook path pays one attribute read); an observer that raises is logged and skipped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._observers: tuple[Observer, ...] = ()

    def add(self, observer: Observer) -> None:
        with self._lock:
            self._observers = (*self._observers, observer)

    def remove(self, observer: Observer) -> None:
        """Stop calling `observer` (one registration of it); unknown observers are ignored."""
        with self._lock:
            i = next((i for i, known in enumerate(self._observers) if known is observer), None)
            if i is not None:
                self._observers = self._observers[:i] + self._observers[i + 1:]

    def notify(self, records: Sequence[EvalRecord]) -> None:
        for observer in self._observers:  # a snapshot: observers may come and go on other threads
            try:
                observer(records)
            except Exception:
                log.exception("record_observer_failed", observer=repr(observer), records=len(records))


observers = RecordObservers()
