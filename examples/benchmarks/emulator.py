"""The CUDA emulator's speed: a shared-memory tiled matmul and a vector add, against C loops and numpy.

The matmul uses 16x16 tiles, 256 threads a block and two barriers per tile step; the C loop nest runs the same
tiled algorithm as a plain sequential CPU kernel (the emulator, like the GPU, spreads blocks over the cores).
The vector add has no barrier, so the emulator runs it without fibers; its C loop is a plain sequential loop.
Checking mode (`build(check=True)`) is timed on the same kernels. Medians of repeated runs; each kernel's output
is checked against numpy once, after its warm-up run, before it is timed.

Run: python examples/benchmarks/emulator.py (`--quick`: small sizes and few repeats, a smoke run of the script)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("HIDET_LANG_CUDA", "emulator")

import hidet_lang as hidet  # noqa: E402
from hidet_lang import attrs, f32, grid, i32, register_tensor  # noqa: E402
from hidet_lang.cuda import blockIdx, shared_tensor, syncthreads, threadIdx  # noqa: E402

T = 16  # tile edge; a block has T * T = 256 threads

with hidet.script_module() as cuda_matmul_module:

    @hidet.script
    def cuda_matmul(n: i32, a: f32[n, n], b: f32[n, n], c: f32[n, n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (T, T)
        attrs.cuda.grid_dim = (n // T, n // T)
        ta = shared_tensor(f32, [T, T])
        tb = shared_tensor(f32, [T, T])
        row = blockIdx.y * T + threadIdx.y
        col = blockIdx.x * T + threadIdx.x
        acc = 0.0
        for k0 in range(0, n, T):
            ta[threadIdx.y, threadIdx.x] = a[row, k0 + threadIdx.x]
            tb[threadIdx.y, threadIdx.x] = b[k0 + threadIdx.y, col]
            syncthreads()
            for k in range(T):
                acc += ta[threadIdx.y, k] * tb[k, threadIdx.x]
            syncthreads()
        c[row, col] = acc

with hidet.script_module() as cpu_matmul_module:

    @hidet.script
    def cpu_matmul(n: i32, a: f32[n, n], b: f32[n, n], c: f32[n, n]):  # noqa: F821 (parameters)
        attrs.func_kind = "public"
        for bi, bj in grid(n // T, n // T):
            ta = register_tensor(f32, [T, T])
            tb = register_tensor(f32, [T, T])
            acc = register_tensor(f32, [T, T])
            for i, j in grid(T, T):
                acc[i, j] = 0.0
            for k0 in range(0, n, T):
                for i, j in grid(T, T):
                    ta[i, j] = a[bi * T + i, k0 + j]
                    tb[i, j] = b[k0 + i, bj * T + j]
                for i, j in grid(T, T):
                    for k in range(T):
                        acc[i, j] += ta[i, k] * tb[k, j]
            for i, j in grid(T, T):
                c[bi * T + i, bj * T + j] = acc[i, j]

with hidet.script_module() as cuda_add_module:

    @hidet.script
    def cuda_add(n: i32, a: f32[n], b: f32[n], c: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 256
        attrs.cuda.grid_dim = (n + 255) // 256
        i = blockIdx.x * 256 + threadIdx.x
        if i < n:
            c[i] = a[i] + b[i]

with hidet.script_module() as cpu_add_module:

    @hidet.script
    def cpu_add(n: i32, a: f32[n], b: f32[n], c: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "public"
        for i in range(n):
            c[i] = a[i] + b[i]


def median_seconds(fn, *args, repeats: int) -> float:
    """Median seconds of `fn(*args)` over `repeats` runs, after one warm-up run."""
    fn(*args)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def checked_median_seconds(fn, n: int, a: np.ndarray, b: np.ndarray, expected: np.ndarray, *, repeats: int,
                           k: int | None = None) -> float:
    """Median seconds of `fn(n, a, b, c)`; the output of its warm-up run is checked against `expected` first
    (exactly, or with the float32 matmul bound for a reduction of length `k`)."""
    c = np.full_like(expected, np.nan)
    fn(n, a, b, c)
    if k is None:
        np.testing.assert_array_equal(c, expected)
    else:
        # float32 sums of k products in another order than numpy's BLAS
        np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5 * k)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(n, a, b, c)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats")
    quick = parser.parse_args().quick
    repeats = 2 if quick else 7
    emu_mm, emu_mm_checked = cuda_matmul_module.build(), cuda_matmul_module.build(check=True)
    emu_add, emu_add_checked = cuda_add_module.build(), cuda_add_module.build(check=True)
    cpu_mm, cpu_add_built = cpu_matmul_module.build(), cpu_add_module.build()
    rng = np.random.default_rng(0)
    rows = []
    for n in (64, 128) if quick else (256, 512):
        a, b = rng.standard_normal((2, n, n), dtype=np.float32)
        expected = a @ b
        rows.append((f"tiled matmul {n}^3",
                     checked_median_seconds(emu_mm, n, a, b, expected, k=n, repeats=repeats),
                     checked_median_seconds(emu_mm_checked, n, a, b, expected, k=n,
                                            repeats=1 if n > 256 else min(3, repeats)),
                     checked_median_seconds(cpu_mm, n, a, b, expected, k=n, repeats=repeats),
                     median_seconds(np.matmul, a, b, np.empty_like(expected), repeats=repeats)))
    n = 1 << (14 if quick else 20)
    a, b = rng.standard_normal((2, n), dtype=np.float32)
    expected = a + b
    rows.append((f"vector add {n >> 10}K" if n < 1 << 20 else f"vector add {n >> 20}M",
                 checked_median_seconds(emu_add, n, a, b, expected, repeats=repeats),
                 checked_median_seconds(emu_add_checked, n, a, b, expected, repeats=repeats),
                 checked_median_seconds(cpu_add_built, n, a, b, expected, repeats=repeats),
                 median_seconds(np.add, a, b, np.empty_like(expected), repeats=repeats)))

    print(f"{'':<20}{'emulator':>12}{'checking mode':>16}{'C loop nest':>14}{'numpy':>12}"
          f"{'emu / C':>10}{'check / emu':>13}")
    for name, emu, checked, c_loop, numpy_time in rows:
        print(f"{name:<20}{emu * 1e3:>9.2f} ms{checked * 1e3:>13.2f} ms{c_loop * 1e3:>11.2f} ms"
              f"{numpy_time * 1e3:>9.2f} ms{emu / c_loop:>9.1f}x{checked / emu:>12.1f}x")
    print("every emulator and C loop result matches numpy")


if __name__ == "__main__":
    main()
