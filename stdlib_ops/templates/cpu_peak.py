"""What the CPU this process runs on can do at best, the yardstick of a profile's GFLOP/s and GB/s (`Peak`): both
measured once a process (per thread count) with kernels written in the DSL, on the threads the kernels run on.

- **Arithmetic** (`fma_gflops`): on each of `threads` OpenMP threads, `CHAINS` independent vectors of f32 (the
  widest vector type the CPU templates use here, `cpu_lanes.machine_lanes`) each take a stream of fused
  multiply-adds, counted as two operations each; the best of a few runs. A figure from the data sheet (threads x
  clock x lanes x 2 x 2 FMA pipes) misses what the cores really run at: the nominal clock the kernel reports is
  not the turbo clock an FMA loop runs at, nor the lower clock some cores drop to for wide vectors, and some cores
  have one FMA pipe rather than two. `nominal_gflops` keeps that figure, as a bound the measurement is checked
  against. A machine whose C compiler enables no vector FMA gets no arithmetic peak (None: a profile prints the
  fraction as unknown).

  The loop keeps every accumulator in a vector register with no other instruction than the FMAs and the loop's
  count, as hand-written intrinsics do (the C compiler's assembly of `chains_module` shows it), given two rules:
  1. enough chains to hide the FMA's latency: 2 pipes x 4 cycles = 8 FMAs in flight a core, and more for cores
     of a longer latency; `CHAINS` keeps two registers for the operands and stays below the 32 (AVX-512) or 16
     vector registers.
  2. the accumulators' array is only ever read and written as whole vectors: the lanes leave it by a vector store
     to the output, never lane by lane (a `reduce_sum`). An array also read as single floats is not split into
     registers by GCC: it stays in memory, GCC moves its loads and stores out of the loop, and the loop then
     carries two register copies a chain beside its FMA (12 chains: 24 copies and 12 FMAs a step, 200 rather than
     215 GFLOP/s a thread here), or spills to the stack with 16 chains or more.
  The loop is parallel on exactly `threads` threads (`grid(..., attrs="pN")`): a plain parallel loop of a few
  iterations runs on one thread, as too little work to wake the others (`codegen/emit/parallel_work.py`).
- **bfloat16 dot products** (`dot_bf16_gflops`): the same loop of `f32x16_dot_bf16` (AVX512-BF16's `vdpbf16ps`:
  16 lanes of two multiply-adds each, 64 operations). Cores differ in how fast it runs beside their f32 FMAs (this
  project's Sapphire Rapids issues it at a quarter of the FMAs' rate, so it computes at half theirs: 104 against
  210 GFLOP/s on one core; by their documented rates, cores whose 512-bit FMA is double-pumped compute it at twice
  theirs), so `bf16_dot_pays` asks the measurement, on one thread, whether `matmul_cpu` should multiply bfloat16
  operands by it.
- **Memory** (`copy_gbs`): a copy of `COPY_BYTES` bytes (past every cache) in vectors of the widest type, between
  arrays aligned to cache lines, the vectors spread over the `threads` threads, counting the bytes read and
  written; the best of a few, after a first copy that maps the target's pages. One thread alone does not draw a
  socket's bandwidth (its outstanding misses cap it: 40% of two threads' here), so the copy runs on the threads
  a kernel runs on: an attainable streaming bandwidth for the kernels' loads and stores rather than the DIMMs'
  nominal one.

A measurement costs some tens of milliseconds, once a process and thread count (the kernels' compilation comes
out of the on-disk cache after the first process).
"""

from __future__ import annotations

import functools
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codegen.runtime import empty
from hidet_lang import attrs, bfloat16, f32, grid, i32, meta, register_tensor, script, script_module
from hidet_lang import cpu as vectors
from stdlib_ops.templates.cpu_lanes import machine_has_bf16_dot, machine_lanes

FMA_PIPES = 2
"""Vector FMA units a core on the AVX2 and AVX-512 server cores of the last decade (for `nominal_gflops`)."""

CHAINS = {16: 24, 8: 12, 4: 12}
"""Independent accumulators a thread of the FMA loop, per vector width: at least FMA pipes x latency (2 x 4 on
Intel's cores, 2 x 5 on AMD's would do), with the two operands in registers too: 26 of AVX-512's 32 registers, 14
of AVX2's 16."""

FMA_ITERATIONS = 1 << 20
"""Steps of each chain a timed run: about 4 ms for AVX-512's 24 chains at 3 GHz (two FMAs a cycle), half that for
12."""

COPY_BYTES = 64 * 1024 * 1024
"""The size of the array copied to measure the memory bandwidth: larger than any last-level cache a core sees."""

RUNS = 5
"""Timed runs of each measurement (after one untimed); the fastest counts."""


@dataclass(frozen=True)
class Peak:
    """The machine's best f32 arithmetic rate (`gflops`, in 1e9 operations a second; None where the machine has no
    vector FMA to measure) and memory bandwidth (`gbs`, 1e9 bytes a second) for `threads` threads."""

    gflops: float | None
    gbs: float
    threads: int

    def __str__(self) -> str:
        arithmetic = "unknown" if self.gflops is None else f"{self.gflops:.0f} GFLOP/s"
        return (f"peak on {self.threads} threads: {arithmetic} (measured f32 FMA), {self.gbs:.1f} GB/s "
                "(measured copy)")


def machine_peak(threads: int | None = None) -> Peak:
    """The measured peak of this machine for `threads` threads (None: the cores this process may run on)."""
    threads = len(os.sched_getaffinity(0)) if threads is None else threads
    lanes = machine_lanes()
    return Peak(None if lanes is None else fma_gflops(threads, lanes), copy_gbs(threads, lanes), threads)


def fastest(fn: Callable[[], object]) -> float:
    """The seconds of the fastest of `RUNS` calls of `fn`, after one untimed call."""
    fn()
    best = math.inf
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


CHAIN_OPERATIONS = ("fma", "dot_bf16")
"""The steps a chain of `chains_module` may take: `acc * 0.5 + 1` by a fused multiply-add, or `f32x16_dot_bf16` of a
pair of ones and pairs of 0.25 (2 and 4 operations a lane)."""


@functools.cache
def chains_module(threads: int, lanes: int, operation: str) -> object:
    """The compiled public function `run(iters, out)`: on each of `threads` threads `t`, `CHAINS[lanes]` vectors of
    `lanes` floats (lane values 0, 1, 2, ... a chain, so that no two chains are the same computation) each take
    `iters` steps of `operation` (one of `CHAIN_OPERATIONS`), then go to `out[t * CHAINS[lanes] * lanes:]` (see the
    module docstring for how the loop is written)."""
    if operation not in CHAIN_OPERATIONS or (operation == "dot_bf16" and lanes != 16):
        raise ValueError(f"chains_module: {operation!r} on {lanes} lanes is not a step it measures")
    chains, parallel = CHAINS[lanes], f"p{threads}"
    load, store, fma, broadcast = (getattr(vectors, f"f32x{lanes}_{op}") for op in ("load", "store", "fma",
                                                                                     "broadcast"))
    with script_module() as module:
        @script
        def chains_of_steps(iters: i32, out: ~f32):
            attrs.func_kind = "cpu_internal"
            attrs.noinline = True  # compiled on its own: the accumulators get the vector registers
            half = broadcast(0.5)
            one = broadcast(1.0)
            pair = register_tensor(bfloat16, [2])  # the dot product's operands
            b = register_tensor(bfloat16, [2 * lanes])
            if operation == "dot_bf16":
                for i in range(2):
                    pair[i] = bfloat16(1.0)
                for i in range(2 * lanes):
                    b[i] = bfloat16(0.25)
            regs = register_tensor(f32, [chains * lanes])  # whole vectors only: see the module docstring
            for i in meta.range(chains):
                store(~regs[i * lanes], broadcast(f32(i)))
            for _ in range(iters):
                for i in meta.range(chains):
                    if operation == "fma":
                        store(~regs[i * lanes], fma(load(~regs[i * lanes]), half, one))
                    else:
                        store(~regs[i * lanes], vectors.f32x16_dot_bf16(load(~regs[i * lanes]), ~pair[0], ~b[0]))
            for i in meta.range(chains):
                store(out + i * lanes, load(~regs[i * lanes]))

        @script
        def run(iters: i32, out: ~f32):
            attrs.func_kind = "public"
            for t in grid(threads, attrs=parallel):
                chains_of_steps(iters, out + t * (chains * lanes))

    return module.build("cpu")


def chains_gflops(threads: int, lanes: int, operation: str) -> float:
    """The measured rate of `threads` threads running `chains_module(threads, lanes, operation)`, in GFLOP/s (two
    operations a multiply-add), after checking every lane's value."""
    module = chains_module(threads, lanes, operation)
    chains = CHAINS[lanes]
    out = np.zeros(threads * chains * lanes, np.float32)
    seconds = fastest(lambda: module(FMA_ITERATIONS, out))
    if operation == "fma":
        # acc * 0.5 + 1 halves acc's distance to 2 a step: every lane is exactly 2 after some 30 steps (no
        # overflow, no subnormals on the way), which also shows that each chain ran
        expected, per_lane = np.float32(2.0), 2
    else:
        # each step adds 1 * 0.25 twice to every lane, exactly (the sums stay below 2^22)
        start = np.tile(np.arange(chains, dtype=np.float32).repeat(lanes), threads)
        expected, per_lane = start + 0.5 * FMA_ITERATIONS, 4
    if not (out == expected).all():
        raise RuntimeError(f"the {operation} loop of {lanes} lanes on {threads} threads computed wrong values")
    return per_lane * threads * FMA_ITERATIONS * chains * lanes / seconds / 1e9


@functools.cache
def fma_gflops(threads: int, lanes: int) -> float:
    """The measured f32 FMA rate of `threads` threads (`chains_gflops` of 'fma'), in GFLOP/s."""
    return chains_gflops(threads, lanes, "fma")


@functools.cache
def dot_bf16_gflops(threads: int) -> float:
    """The measured rate of `threads` threads taking `f32x16_dot_bf16` steps (`chains_gflops` of 'dot_bf16'), in
    GFLOP/s."""
    return chains_gflops(threads, 16, "dot_bf16")


DOT_MARGIN = 1.25
"""How much faster than f32 FMAs the bfloat16 dot product must compute for `bf16_dot_pays`: clear of the noise of
a measurement (the cores known compute at half or twice the rate)."""


def bf16_dot_pays() -> bool:
    """Whether this machine has AVX512-BF16's dot product and it computes `DOT_MARGIN` times as fast as f32 FMAs
    (one thread of each, measured once a process)."""
    return machine_has_bf16_dot() and dot_bf16_gflops(1) >= DOT_MARGIN * fma_gflops(1, 16)


@functools.cache
def copy_module(threads: int, lanes: int | None) -> object:
    """The compiled public function `copy(n, src, dst)`: `dst[i] = src[i]` for `n` elements, in vectors of `lanes`
    floats (`n` a multiple of it; None: float by float), spread over `threads` threads."""
    parallel = f"p{threads}"
    with script_module() as module:
        if lanes is None:
            @script
            def copy(n: i32, src: ~f32, dst: ~f32):
                attrs.func_kind = "public"
                for i in grid(n, attrs=parallel):
                    dst[i] = src[i]
        else:
            load, store = getattr(vectors, f"f32x{lanes}_load"), getattr(vectors, f"f32x{lanes}_store")

            @script
            def copy(n: i32, src: ~f32, dst: ~f32):
                attrs.func_kind = "public"
                for i in grid(n // lanes, attrs=parallel):
                    store(dst + i * lanes, load(src + i * lanes))

    return module.build("cpu")


@functools.cache
def copy_gbs(threads: int, lanes: int | None) -> float:
    """The measured bandwidth of `threads` threads copying `COPY_BYTES` bytes with `copy_module(threads, lanes)`,
    in GB/s (read and written bytes both counted)."""
    module = copy_module(threads, lanes)
    n = COPY_BYTES // 4
    source, target = empty(n), empty(n)  # on cache lines: numpy's own start 16 bytes past a page
    source[:] = 1.0
    seconds = fastest(lambda: module(n, source, target))
    return 2 * COPY_BYTES / seconds / 1e9


def nominal_gflops(threads: int) -> float | None:
    """The data sheet's f32 rate for `threads` threads: threads x `clock_ghz` x lanes x 2 x `FMA_PIPES`, in GFLOP/s
    (None where the clock is not known or the machine has no vector FMA); a bound to check the measurement with."""
    ghz, lanes = clock_ghz(), machine_lanes()
    return None if ghz is None or lanes is None else threads * ghz * lanes * 2 * FMA_PIPES


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
