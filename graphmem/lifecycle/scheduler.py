"""The background maintenance scheduler."""

from __future__ import annotations

import threading
from collections.abc import Callable

from graphmem.errors import InvalidInput
from graphmem.lifecycle.reports import log


class MaintenanceScheduler:
    """Runs a job on a background thread every ``interval`` seconds until stopped.

    Errors of a run are logged and counted; the next run still happens. ``stop()`` wakes
    the thread, waits for a run in progress to finish and joins it.

    >>> s = MaintenanceScheduler(lambda: None, interval=3600).start()
    >>> s.stop()
    True
    """

    def __init__(
        self,
        job: Callable[[], object],
        interval: float,
        *,
        run_immediately: bool = False,
        name: str = "graphmem-maintenance",
    ) -> None:
        if interval <= 0:
            raise InvalidInput("interval must be positive")
        self._job = job
        self.interval = interval
        self.run_immediately = run_immediately
        self._name = name
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.errors = 0
        self.last_result: object = None
        self.last_error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> MaintenanceScheduler:
        """Start the background thread (InvalidInput if it is already running)."""
        if self.running:
            raise InvalidInput("scheduler already running")
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        first = self.run_immediately
        while first or not self._stop.wait(self.interval):
            first = False
            if self._stop.is_set():
                break
            try:
                result = self._job()
                with self._cond:
                    self.last_result = result
            except Exception as e:  # keep the scheduler alive; the error is recorded
                log.exception("scheduled maintenance failed: %s", type(e).__name__)
                with self._cond:
                    self.errors += 1
                    self.last_error = e
            with self._cond:
                self.runs += 1
                self._cond.notify_all()

    def wait_for_runs(self, n: int, timeout: float | None = None) -> bool:
        """Block until at least ``n`` runs have finished (False on timeout)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.runs >= n, timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop and join the thread; True when it has ended (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def __enter__(self) -> MaintenanceScheduler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
