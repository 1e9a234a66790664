"""`benchmark_func`: the latency of a function, as Hidet's `hidet.utils.benchmark.benchmark_func` measures it."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def benchmark_func(run_func: Callable[[], Any], warmup: int = 1, number: int = 5, repeat: int = 5,
                   median: bool = True) -> float | list[float]:
    """Milliseconds per call of `run_func`: `warmup` calls, then `repeat` timings of `number` calls each; the
    median of the timings (or, with `median=False`, the list of them). Work a call leaves running on a GPU is waited
    for before each timing ends."""
    for _ in range(warmup):
        run_func()
    _wait_for_device()
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            run_func()
        _wait_for_device()
        timings.append((time.perf_counter() - start) * 1e3 / number)
    return statistics.median(timings) if median else timings


def _wait_for_device() -> None:
    """Wait for the GPU, where this process has used one (kernel launches on device arrays return at once)."""
    driver = sys.modules.get("codegen.runtime.cuda_driver")
    if driver is not None and driver.gpu_available():
        driver.synchronize()
