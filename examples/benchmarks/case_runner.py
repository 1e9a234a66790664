"""Running benchmark cases so that no case can end the run: each case runs in a worker process, which is stopped
when the case outlasts its timeout and replaced when it dies; the case's error, crash or timeout becomes its row and
the run goes on. A `Budget` bounds the whole run: once it is spent no case starts (each becomes a 'skipped' row),
and a running case is stopped when it runs out (a 'stopped' row: not judged, unlike a 'timeout').

A worker is a module-level function `target(connection, *args)` that calls `serve(connection, run_one)`: it
receives case names and sends back each case's row (a dict). Workers start by 'spawn' (a fresh interpreter, no
CUDA context inherited), which imports the main script again: the script's work must be under
`if __name__ == "__main__":`.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

Row = dict[str, Any]


@dataclass
class Budget:
    """The seconds a run may take from its start (`seconds` None: no limit)."""

    seconds: float | None
    start: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        """Seconds left (infinite without a limit; 0 once spent)."""
        if self.seconds is None:
            return float("inf")
        return max(0.0, self.seconds - (time.monotonic() - self.start))


def error_row(name: str, status: str, message: str) -> Row:
    """The row of a case that did not produce its own: `status` 'error', 'timeout', 'stopped' or 'skipped', and
    why."""
    return {"case": name, "status": status, "error": message}


def serve(connection: Connection, run_one: Callable[[str], Row]) -> None:
    """A worker's loop: run each case name received with `run_one`, send its row (an exception becomes an 'error'
    row with the exception's last frame); return when the connection closes or sends None."""
    while True:
        try:
            name = connection.recv()
        except (EOFError, OSError):
            return
        if name is None:
            return
        try:
            row = run_one(name)
        except Exception as exc:  # noqa: BLE001 - a failing case is a row, never the end of the run
            where = traceback.extract_tb(exc.__traceback__)[-1]
            row = error_row(name, "error", f"{type(exc).__name__}: {str(exc)[:2000]} "
                                           f"(at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})")
        connection.send(row)


class Worker:
    """One worker process (started on first use) running `target(connection, *args)`; `run` hands it a case."""

    def __init__(self, target: Callable[..., None], args: Sequence[Any]) -> None:
        self._target, self._args = target, tuple(args)
        self._process: Any = None
        self._connection: Connection | None = None

    def _start(self) -> Connection:
        if self._connection is None:
            context = multiprocessing.get_context("spawn")
            parent, child = context.Pipe()
            self._process = context.Process(target=self._target, args=(child, *self._args), daemon=True)
            self._process.start()
            child.close()
            self._connection = parent
        return self._connection

    def run(self, name: str, timeout: float) -> Row:
        """The row of case `name`, run within `timeout` seconds (the worker is stopped and its case a 'timeout' row
        when it takes longer; a worker that dies makes an 'error' row); a new worker serves the next case after
        either."""
        connection = self._start()
        connection.send(name)
        try:
            if connection.poll(timeout):
                return connection.recv()
        except (EOFError, OSError):
            self._process.join(5)
            code = self._process.exitcode
            self.stop()
            return error_row(name, "error", f"its process ended (exit code {code})")
        self.stop()
        return error_row(name, "timeout", f"no result after {timeout:.0f} s; its process was stopped")

    def stop(self) -> None:
        """End the worker process (a hung one is killed)."""
        if self._connection is None:
            return
        try:
            self._connection.send(None)
        except OSError:
            pass
        self._connection.close()
        self._process.join(2)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._connection = self._process = None


def run_guarded(names: Sequence[str], target: Callable[..., None], args: Sequence[Any], *, workers: int,
                timeout: float, budget: Budget, on_row: Callable[[Row], None]) -> list[Row]:
    """Run the cases `names` on `workers` worker processes (`target(connection, *args)`, see the module docstring),
    each within `timeout` seconds and what is left of `budget`; `on_row` sees each row as it comes (one at a time);
    the rows in the order of `names`."""
    rows: dict[str, Row] = {}
    pending = list(reversed(names))
    lock = threading.Lock()

    def work() -> None:
        worker = Worker(target, args)
        try:
            while True:
                with lock:
                    if not pending:
                        return
                    name = pending.pop()
                left = budget.left()
                if left <= 0:
                    row = error_row(name, "skipped", "the time budget was spent before it started")
                else:
                    row = worker.run(name, min(timeout, left))
                    if row["status"] == "timeout" and left < timeout:
                        row = error_row(name, "stopped", f"the time budget ran out after {left:.0f} s; its process "
                                                         "was stopped")
                with lock:
                    rows[name] = row
                    on_row(row)
        finally:
            worker.stop()

    threads = [threading.Thread(target=work, name=f"case-worker-{k}") for k in range(max(1, min(workers, len(names))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [rows[name] for name in names]
