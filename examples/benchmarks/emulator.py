"""The CUDA emulator's speed: a shared-memory tiled matmul and a vector add, against C loops and numpy.

The matmul uses 16x16 tiles, 256 threads a block and two barriers per tile step; the C loop nest runs the same
tiled algorithm as a plain sequential CPU kernel (the emulator, like the GPU, spreads blocks over the cores).
The vector add has no barrier, so the emulator runs it without fibers; its C loop is a plain sequential loop.
Checking mode (`build(check=True)`) is timed on the same kernels. Medians of repeated runs.

Run: python examples/benchmarks/emulator.py
"""

from __future__ import annotations

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


def median_seconds(fn, *args, repeats: int = 7) -> float:
    fn(*args)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    emu_mm, emu_mm_checked = cuda_matmul_module.build(), cuda_matmul_module.build(check=True)
    emu_add, emu_add_checked = cuda_add_module.build(), cuda_add_module.build(check=True)
    cpu_mm, cpu_add_built = cpu_matmul_module.build(), cpu_add_module.build()
    rng = np.random.default_rng(0)
    rows = []
    for n in (256, 512):
        a, b = rng.standard_normal((2, n, n), dtype=np.float32)
        c = np.zeros((n, n), np.float32)
        emu_mm(n, a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
        rows.append((f"tiled matmul {n}^3", median_seconds(emu_mm, n, a, b, c),
                     median_seconds(emu_mm_checked, n, a, b, c, repeats=1 if n > 256 else 3),
                     median_seconds(cpu_mm, n, a, b, c), median_seconds(np.matmul, a, b, c)))
    n = 1 << 20
    a, b = rng.standard_normal((2, n), dtype=np.float32)
    c = np.zeros(n, np.float32)
    emu_add(n, a, b, c)
    np.testing.assert_array_equal(c, a + b)
    rows.append(("vector add 1M", median_seconds(emu_add, n, a, b, c), median_seconds(emu_add_checked, n, a, b, c),
                 median_seconds(cpu_add_built, n, a, b, c), median_seconds(np.add, a, b, c)))

    print(f"{'':<20}{'emulator':>12}{'checking mode':>16}{'C loop nest':>14}{'numpy':>12}"
          f"{'emu / C':>10}{'check / emu':>13}")
    for name, emu, checked, c_loop, numpy_time in rows:
        print(f"{name:<20}{emu * 1e3:>9.2f} ms{checked * 1e3:>13.2f} ms{c_loop * 1e3:>11.2f} ms"
              f"{numpy_time * 1e3:>9.2f} ms{emu / c_loop:>9.1f}x{checked / emu:>12.1f}x")


if __name__ == "__main__":
    main()
