"""The batched matmul template for the CPU: cache-blocked tiles, one parallel loop over them, vectorizable rows.

`c[b, i, j] = sum_k a[b, i, k] * b[b, k, j]`, accumulated in f32. The output is cut into `block_m x block_n`
tiles, spread over the OpenMP threads (one parallel loop over batch entries x tiles). A tile accumulates in a
local f32 array, stepping along k by `block_k` so that the `block_k x block_n` panel of `b` it reads stays in
cache; the innermost loop runs along a row of `b` and of the tile, contiguous in both, which the C compiler
vectorizes. Edge tiles stop at the matrices' edges, so every shape is correct.

`MATMUL_CPU_SPACE` is the template's tuning space (`block_m x block_n x block_k`); its default point is the
default of the parameters, a good tile for AVX2 to AVX-512 machines without tuning.

The kernel follows the kernel contract: `a` and `b` are only read element by element, `c` only stored element
by element.
"""

from __future__ import annotations

from hidet_lang import attrs, f32, grid, i32, register_tensor, script, script_module
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.space import TuningSpace, declare_space

MATMUL_CPU_DTYPES = ("float32", "float16")
ACCUMULATOR_BYTES = 256 * 1024

MATMUL_CPU_SPACE = TuningSpace(
    {"block_m": (16, 32, 64), "block_n": (64, 128, 256), "block_k": (64, 128, 256)},
    default={"block_m": 32, "block_n": 256, "block_k": 128},
    constraint=lambda p: p["block_m"] * p["block_n"] * 4 <= ACCUMULATOR_BYTES,
)


@declare_space(MATMUL_CPU_SPACE)
def matmul_cpu(batch: Size, m: Size, n: Size, k: Size, dtype: str = "float32", *, block_m: int = 32,
               block_n: int = 256, block_k: int = 128) -> ScriptModule:
    """A module with one CPU kernel `matmul(<symbolic sizes>, a, b, c)` computing `c = a @ b` per batch entry.

    `a: dtype[batch, m, k]`, `b: dtype[batch, k, n]`, `c: dtype[batch, m, n]`; each size is an int or a symbolic
    name. Tiles are `block_m x block_n`; k advances by `block_k`.
    """
    name = "matmul_cpu"
    check_sizes(name, {"batch": batch, "m": m, "n": n, "k": k})
    dt = template_dtype(name, dtype, MATMUL_CPU_DTYPES)
    require(min(block_m, block_n, block_k) >= 1, name, "block sizes must be positive")
    require(block_m * block_n * 4 <= ACCUMULATOR_BYTES, name, "the accumulator tile must fit in 256 KB")

    with script_module() as module:

        @script
        def matmul(batch: i32, m: i32, n: i32, k: i32, a: dt[batch, m, k], b: dt[batch, k, n], c: dt[batch, m, n]):
            attrs.func_kind = "cpu_kernel"
            tiles_m = (m + block_m - 1) // block_m
            tiles_n = (n + block_n - 1) // block_n
            for t in grid(batch * tiles_m * tiles_n, attrs="p"):
                bi = t // (tiles_m * tiles_n)
                m0 = t // tiles_n % tiles_m * block_m
                n0 = t % tiles_n * block_n
                rows = min(block_m, m - m0)
                cols = min(block_n, n - n0)
                acc = register_tensor(f32, [block_m, block_n])
                for i in range(rows):
                    for j in range(cols):
                        acc[i, j] = 0.0
                for k0 in range(0, k, block_k):
                    k1 = min(k0 + block_k, k)
                    for i in range(rows):
                        for kk in range(k0, k1):
                            aik = f32(a[bi, m0 + i, kk])
                            for j in range(cols):
                                acc[i, j] += aik * f32(b[bi, kk, n0 + j])
                for i in range(rows):
                    for j in range(cols):
                        c[bi, m0 + i, n0 + j] = dt(acc[i, j])

    return bind_sizes(module, "matmul", {"batch": batch, "m": m, "n": n, "k": k})
