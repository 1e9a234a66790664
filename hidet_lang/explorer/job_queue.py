"""The jobs of the server: run on threads of their own (never on the server's workers, so that the page and its
assets are answered however many jobs wait), at most `workers` at a time, at most `max_waiting` waiting (past them
a new job is refused as busy), each cancellable by the name the page gave it."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

Result = dict[str, Any]


class Busy(RuntimeError):
    """The queue is full: `waiting` jobs wait for a turn."""

    def __init__(self, waiting: int) -> None:
        super().__init__(f"busy, {waiting} waiting")
        self.waiting = waiting


class JobControl:
    """What a running job is told from outside: whether it was cancelled."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Ask the job to stop (its child is killed at the next look)."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        """Whether the job was cancelled."""
        return self._cancelled.is_set()


class JobQueue:
    """Jobs run by `workers` threads of their own, with at most `max_waiting` more waiting."""

    def __init__(self, workers: int = 2, max_waiting: int = 8) -> None:
        self.workers, self.max_waiting = workers, max_waiting
        self._executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="explorer-job")
        self._lock = threading.Lock()
        self._pending = 0
        self._named: dict[str, JobControl] = {}
        self._active: set[JobControl] = set()

    def submit(self, name: str | None, work: Callable[[JobControl], Result]
               ) -> tuple[concurrent.futures.Future[Result], JobControl]:
        """Queue `work(control)`, under `name` when given (for `cancel`): its future and its control; Busy when
        the queue is full."""
        control = JobControl()
        with self._lock:
            if self._pending >= self.workers + self.max_waiting:
                raise Busy(self._pending - self.workers)
            self._pending += 1
            self._active.add(control)
            if name is not None:
                self._named[name] = control
        future = self._executor.submit(work, control)
        future.add_done_callback(lambda _: self._finished(name, control))
        return future, control

    def _finished(self, name: str | None, control: JobControl) -> None:
        with self._lock:
            self._pending -= 1
            self._active.discard(control)
            if name is not None and self._named.get(name) is control:
                del self._named[name]

    @property
    def waiting(self) -> int:
        """How many jobs wait for a turn."""
        with self._lock:
            return max(self._pending - self.workers, 0)

    def cancel(self, name: str) -> bool:
        """Cancel the job called `name`; whether there was one (waiting or running)."""
        with self._lock:
            control = self._named.get(name)
        if control is not None:
            control.cancel()
        return control is not None

    def close(self) -> None:
        """Cancel every job and let the threads go."""
        with self._lock:
            controls = list(self._active)
        for control in controls:
            control.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
