"""What the benchmark scripts share: the process's threads and BLAS, timing a call by the median of repeated loops or
by its best run, contenders timed in turns, and medians of samples."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
"""Settings that pin OpenBLAS to another kernel or cache size than it picks for the machine."""


def prepare_process(threads: int, main: bool) -> None:
    """Before numpy and the kernels load: a script run as `main` where the environment sets `OPENBLAS_OVERRIDES`
    runs itself again without them (so that numpy runs the kernel OpenBLAS picks for this machine); OpenMP (ours,
    torch's) gets `threads` threads."""
    if main and any(name in os.environ for name in OPENBLAS_OVERRIDES):
        os.execve(sys.executable, [sys.executable, *sys.argv],
                  {k: v for k, v in os.environ.items() if k not in OPENBLAS_OVERRIDES})
    os.environ["OMP_NUM_THREADS"] = str(threads)


def loop_time(fn: Callable[[], object], number: int = 20000, repeat: int = 7) -> float:
    """Median seconds per call of `fn` over `repeat` loops of `number` calls (the machine is noisy: medians)."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def best_time(fn: Callable[[], object], repeat: int) -> float:
    """The shortest of `repeat` timed calls of `fn`, in seconds (for a measured limit: the peak, the bandwidth)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


SETTLE_S = 0.3
"""Seconds to wait before each block of timed loops, so that the worker threads the previous block left spinning
(OpenBLAS's, OpenMP's, onnxruntime's) have gone to sleep and do not take the cores from the next one."""

PASSES = 3
"""How many times the contenders take turns: each pass times a block of `RUNS / PASSES` consecutive loops of each
contender in turn, so that a slow phase of the machine falls on several of them rather than on one."""


def calls_per_loop(fn: Callable[[], object]) -> int:
    """How many calls of `fn` make a timed loop of about 10 ms (after a warm-up call)."""
    fn()
    start = time.perf_counter()
    fn()
    return max(1, int(0.01 / max(time.perf_counter() - start, 1e-7)))


def in_turns(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, list[float]]:
    """Seconds per call of each function over `runs` timed loops (at least `PASSES`), taken in `PASSES` turns of
    consecutive loops; a turn starts after the others' threads have settled and with a warm-up call. (Loops of
    different contenders interleaved one by one measure mostly the waking of each runtime's sleeping threads.)
    One run (a smoke run) times each function's call once, without the settling pauses that would be most of it."""
    if runs == 1:
        return {name: [best_time(fn, 1)] for name, fn in fns.items()}
    numbers = {name: calls_per_loop(fn) for name, fn in fns.items()}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    per_turn = max(1, -(-runs // PASSES))
    for _ in range(PASSES):
        for name, fn in fns.items():
            time.sleep(SETTLE_S)
            fn()
            samples[name] += [loop_time(fn, number=numbers[name], repeat=1) for _ in range(per_turn)]
    return samples


def medians(samples: list[dict[str, float]]) -> dict[str, float]:
    """The median of each measurement over `samples` (one dict of measurements a run)."""
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def synced_median_time(fn: Callable[[], object], sync: Callable[[], None], runs: int, loop_s: float) -> float:
    """Median seconds per call of `fn` over `runs` timed loops of about `loop_s` each (one call when `loop_s` is
    0), after a warm-up call; `sync` waits for the work the calls queued (a GPU's launches return before it is
    done), at the end of each loop."""
    fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    number = max(1, int(loop_s / max(time.perf_counter() - start, 1e-6)))
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)
