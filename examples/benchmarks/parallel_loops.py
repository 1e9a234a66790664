"""Parallel loops on a shared machine: a parallel kernel against its serial build and numpy, with and without
another process holding a core.

Kernels: `vector_add` (memory-bound: c = a + b) at 64K and 1M elements and `polynomial` (compute-bound: a
degree-16 Horner evaluation per element) at 1M, each built twice, its loop parallel (`grid(n, attrs='p')`) and
serial. Each runs while the machine is as it is ("idle": no load of ours besides) and while a process spinning
`while True: pass` holds a core ("busy"), which is killed afterwards. The parallel build is also run in a child
process with OpenMP's defaults (`OMP_WAIT_POLICY=active`, all cores: how parallel loops ran before their thread
count and wait policy were chosen for shared machines; a loop below the work threshold, vector_add 64K, still runs
on one thread there), to show what those choices save.

Columns: median microseconds per call of several timed runs (parallel, serial, numpy), the threads the parallel
loop ran on (`hidet_lang_threads_used`, cpu_threads.h), the parallel time over the serial and over numpy, and the
OpenMP defaults' time and ratio to serial.

`--quick` runs fewer calls (a smoke run of the script, not a measurement).

Run: python examples/benchmarks/parallel_loops.py [--quick]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import hidet_lang as hidet
from hidet_lang import attrs, f32, grid

QUICK = "--quick" in sys.argv
RUNS = 5 if QUICK else 41
CASES = [("vector_add", 1 << 16), ("vector_add", 1 << 20), ("polynomial", 1 << 20)]
COEFFICIENTS = [0.5 ** k for k in range(17)]


def vector_add(n: int, parallel: bool) -> Any:
    """c = a + b over `n` floats, its loop parallel or serial."""
    loop = "p" if parallel else "."
    with hidet.script_module() as module:
        @hidet.script
        def vector_add(a: f32[n], b: f32[n], c: f32[n]):
            attrs.func_kind = "public"
            for i in grid(n, attrs=loop):
                c[i] = a[i] + b[i]
    return module.build()


def polynomial(n: int, parallel: bool) -> Any:
    """c = p(a) by Horner's rule for the degree-16 polynomial of `COEFFICIENTS` (b unused), parallel or serial."""
    loop = "p" if parallel else "."
    with hidet.script_module() as module:
        @hidet.script
        def polynomial(a: f32[n], b: f32[n], c: f32[n]):
            attrs.func_kind = "public"
            for i in grid(n, attrs=loop):
                x = a[i]
                acc = 0.0
                for k in hidet.meta.range(len(COEFFICIENTS)):
                    acc = acc * x + COEFFICIENTS[k]
                c[i] = acc
    return module.build()


def numpy_reference(name: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], object]:
    """numpy's computation of kernel `name`, into `c`."""
    if name == "vector_add":
        return lambda a, b, c: np.add(a, b, out=c)
    coefficients = np.float32(COEFFICIENTS)

    def horner(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        c[...] = 0.0
        for k in coefficients:
            np.multiply(c, a, out=c)
            np.add(c, k, out=c)

    return horner


def median_us(fn: Callable[..., object], *args: Any) -> float:
    """The median microseconds of `RUNS` calls of `fn(*args)` (after a warm-up call)."""
    fn(*args)
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def measure(parallel_only: bool) -> list[dict[str, Any]]:
    """Time every case (checked against numpy first); with `parallel_only`, the parallel build alone."""
    rng = np.random.default_rng(0)
    rows = []
    for name, n in CASES:
        build = vector_add if name == "vector_add" else polynomial
        a, b = rng.uniform(-1, 1, (2, n)).astype(np.float32)
        c, expected = np.empty(n, np.float32), np.empty(n, np.float32)
        reference = numpy_reference(name)
        reference(a, b, expected)
        parallel = build(n, True)
        parallel(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-6)
        row = {"kernel": f"{name} {n >> 10}K", "parallel": median_us(parallel, a, b, c),
               "threads": parallel.threads_used()}
        if not parallel_only:
            serial = build(n, False)
            serial(a, b, c)
            np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-6)
            row["serial"] = median_us(serial, a, b, c)
            row["numpy"] = median_us(reference, a, b, c)
        rows.append(row)
    return rows


def openmp_defaults() -> list[dict[str, Any]]:
    """The parallel builds timed in a child process under OpenMP's own defaults (spinning, every core)."""
    env = {**os.environ, "OMP_WAIT_POLICY": "active", "OMP_NUM_THREADS": str(len(os.sched_getaffinity(0)))}
    child = subprocess.run([sys.executable, __file__, "--child", *sys.argv[1:]], env=env, capture_output=True,
                           text=True, check=True)
    return json.loads(child.stdout.strip().splitlines()[-1])


def with_busy_core(fn: Callable[[], Any]) -> Any:
    """`fn()` while another process spins on a core (killed afterwards)."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # the spinner is running
        return fn()
    finally:
        busy.kill()
        busy.wait()


def print_table(title: str, rows: list[dict[str, Any]], defaults: list[dict[str, Any]]) -> None:
    print(title)
    print(f"{'kernel':<18}{'parallel':>11}{'threads':>9}{'serial':>11}{'numpy':>11}{'vs serial':>11}{'vs numpy':>10}"
          f"{'OpenMP defaults':>18}{'vs serial':>11}")
    for row, default in zip(rows, defaults):
        print(f"{row['kernel']:<18}{row['parallel']:>8.1f} us{row['threads']:>9}{row['serial']:>8.1f} us"
              f"{row['numpy']:>8.1f} us{row['parallel'] / row['serial']:>10.2f}x{row['parallel'] / row['numpy']:>9.2f}x"
              f"{default['parallel']:>15.1f} us{default['parallel'] / row['serial']:>10.2f}x")
    print()


def main() -> None:
    if "--child" in sys.argv:
        print(json.dumps(measure(parallel_only=True)))
        return
    cpus = len(os.sched_getaffinity(0))
    print(f"parallel loops: {cpus} CPUs this process may use; median of {RUNS} calls; 'threads' is what the "
          "parallel loop ran on\n")
    print_table("idle (no load of ours besides):", measure(parallel_only=False), openmp_defaults())
    busy = with_busy_core(lambda: (measure(parallel_only=False), openmp_defaults()))
    print_table("busy (another process spins on one core):", *busy)
    print("every result matched numpy first")


if __name__ == "__main__":
    main()
