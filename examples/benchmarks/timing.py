"""What the benchmark scripts share: timing a call by the median of repeated loops or by its best run, and medians
of samples."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


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


def medians(samples: list[dict[str, float]]) -> dict[str, float]:
    """The median of each measurement over `samples` (one dict of measurements a run)."""
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}
