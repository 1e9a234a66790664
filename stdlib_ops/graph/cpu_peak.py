"""What the CPU this process runs on can do at best, the yardstick of a profile's GFLOP/s and GB/s (`Peak`).

- **Arithmetic**: threads x clock x vector lanes of f32 x 2 (a fused multiply-add is two operations) x 2 (two FMA
  pipes a core, as every AVX2 and AVX-512 server core since Haswell and Zen 2 has). The clock is the CPU's nominal
  frequency as the kernel reports it (`/sys/.../cpuinfo_max_freq`, else the largest `cpu MHz` of `/proc/cpuinfo`);
  the lanes are the widest vector type the CPU templates use here (`cpu_lanes.machine_lanes`).
- **Memory**: measured once a process: the best of a few copies of 64 MiB (past every cache) with numpy, counting
  the bytes read and written, an attainable streaming bandwidth rather than the DIMMs' nominal one.
"""

from __future__ import annotations

import functools
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stdlib_ops.templates.cpu_lanes import machine_lanes

FMA_PIPES = 2
"""Vector FMA units a core: two on the AVX2 and AVX-512 server cores of the last decade."""

COPY_BYTES = 64 * 1024 * 1024
"""The size of the array copied to measure the memory bandwidth: larger than any last-level cache a core sees."""


@dataclass(frozen=True)
class Peak:
    """The machine's best f32 arithmetic rate (`gflops`, in 1e9 operations a second; None where the clock is not
    known) and memory bandwidth (`gbs`, 1e9 bytes a second) for `threads` threads."""

    gflops: float | None
    gbs: float
    threads: int

    def __str__(self) -> str:
        arithmetic = "unknown" if self.gflops is None else f"{self.gflops:.0f} GFLOP/s"
        return f"peak on {self.threads} threads: {arithmetic} (f32 FMA), {self.gbs:.1f} GB/s (measured copy)"


def machine_peak(threads: int | None = None) -> Peak:
    """The peak of this machine for `threads` threads (None: the cores this process may run on)."""
    threads = len(os.sched_getaffinity(0)) if threads is None else threads
    ghz, lanes = clock_ghz(), machine_lanes() or 1
    gflops = None if ghz is None else threads * ghz * lanes * 2 * FMA_PIPES
    return Peak(gflops, copy_bandwidth_gbs(), threads)


def clock_ghz() -> float | None:
    """The CPU's nominal clock in GHz, or None where the kernel reports none."""
    sysfs = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    try:
        return int(sysfs.read_text()) / 1e6
    except (OSError, ValueError):
        pass
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    found = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", text, re.MULTILINE)]
    return max(found) / 1e3 if found else None


@functools.cache
def copy_bandwidth_gbs() -> float:
    """The best of five copies of `COPY_BYTES` bytes, in GB/s (read and written bytes both counted)."""
    source = np.ones(COPY_BYTES // 4, np.float32)
    target = np.empty_like(source)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return 2 * COPY_BYTES / best / 1e9
