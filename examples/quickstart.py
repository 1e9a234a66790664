"""Quick start: two kernels written in hidet-lang, built for the CPU, checked against numpy, and timed.

Run: python examples/quickstart.py
"""

from __future__ import annotations

import statistics
import tempfile
import time

import numpy as np

import hidet_lang as hidet
from codegen.toolchain.cache import clear_memory_cache
from hidet_lang import attrs, f32, grid, register_tensor, repeat

N = 1 << 20  # vector length
M = K = P = 256  # matmul sizes
TILE = 16

# ---------------------------------------------------------------------------------------------------- kernels
with hidet.script_module() as vector_module:

    @hidet.script
    def vector_add(a: f32[N], b: f32[N], c: f32[N]):
        """c = a + b, split over the CPU's cores."""
        attrs.func_kind = "public"
        for i in grid(N, attrs="p"):
            c[i] = a[i] + b[i]


with hidet.script_module() as matmul_module:

    @hidet.script
    def matmul(a: f32[M, K], b: f32[K, P], c: f32[M, P]):
        """c = a @ b: one 16x16 tile of c per parallel iteration, accumulated in a local array."""
        attrs.func_kind = "public"
        tile = repeat(TILE, TILE)  # one worker that visits every (i, j) of a tile
        for ti, tj in grid(M // TILE, P // TILE, attrs="p."):
            acc = register_tensor(f32, [TILE, TILE])
            for i, j in tile.on(0):
                acc[i, j] = 0.0
            for k in range(K):
                for i, j in tile.on(0):
                    acc[i, j] += a[ti * TILE + i, k] * b[k, tj * TILE + j]
            for i, j in tile.on(0):
                c[ti * TILE + i, tj * TILE + j] = acc[i, j]


def median_time(fn, repeats: int = 20) -> float:
    """The median wall time of `fn()` in seconds."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timed_build(module) -> tuple[object, float]:
    """Build `module`; return the built module and the seconds the build took."""
    start = time.perf_counter()
    built = module.build()
    return built, time.perf_counter() - start


def main() -> None:
    # An empty cache, so that the first builds are cold; removed (with the libraries built into it) at the end.
    with tempfile.TemporaryDirectory(prefix="hidet_lang_quickstart_") as empty_cache:
        hidet.option.cache_dir(empty_cache)
        run()


def run() -> None:
    """Build, check and time the two kernels."""
    built_add, add_cold = timed_build(vector_module)
    built_mm, mm_cold = timed_build(matmul_module)
    _, add_same_process = timed_build(vector_module)  # the module remembers its build
    clear_memory_cache()  # forget the in-memory layer: the next build of the same code reads the disk cache
    fresh = hidet.script_module()
    fresh.add(vector_add)
    _, add_disk = timed_build(fresh)

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, N), dtype=np.float32)
    c = np.empty(N, np.float32)
    built_add(a, b, c)
    np.testing.assert_array_equal(c, a + b)

    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((K, P), dtype=np.float32)
    y = np.empty((M, P), np.float32)
    built_mm(x, w, y)
    # float32 sums of 256 products in a different order than BLAS: agree to ~1e-5 relative
    np.testing.assert_allclose(y, x @ w, rtol=1e-4, atol=1e-4)
    print("both kernels match numpy\n")

    print("generated C of vector_add:")
    print(built_add.source().split("void vector_add(float * a, float * b, float * c);")[-1].strip(), "\n")

    print("build time:")
    print(f"  cold (C compiler runs):     vector_add {add_cold * 1e3:7.1f} ms   matmul {mm_cold * 1e3:7.1f} ms")
    print(f"  warm (disk cache):          vector_add {add_disk * 1e3:7.2f} ms")
    print(f"  again in the same process:  vector_add {add_same_process * 1e6:7.1f} us\n")

    rows = [
        ("vector_add 1M", median_time(lambda: built_add(a, b, c)), built_add.threads_used(),
         median_time(lambda: np.add(a, b, out=c))),
        ("matmul 256^3", median_time(lambda: built_mm(x, w, y)), built_mm.threads_used(),
         median_time(lambda: np.matmul(x, w, out=y))),
    ]
    # a parallel loop runs on the cores other processes leave free (README: "Parallel loops on a shared machine")
    print(f"{'kernel':<16}{'hidet-lang':>14}{'threads':>9}{'numpy':>14}{'ratio':>10}")
    for name, ours, threads, theirs in rows:
        print(f"{name:<16}{ours * 1e6:>11.1f} us{threads:>9}{theirs * 1e6:>11.1f} us{ours / theirs:>9.2f}x")


if __name__ == "__main__":
    main()
