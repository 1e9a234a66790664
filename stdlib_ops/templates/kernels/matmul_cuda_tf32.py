"""The batched f32 matmul template on the tensor cores in TF32 (sm_80 and later), taken only where
`hidet.option.allow_tf32(True)` allows it: `matmul_cuda_f16_mma`'s kernel (`mma_matmul`) on f32 tiles, rounded to
TF32 in shared memory, multiplied with `mma.m16n8k8` and f32 accumulation.

`c[b, i, j] = sum_k tf32(a[b, i, k]) * tf32(b[b, k, j])` with f32 inputs and output, where `tf32` rounds to 10
mantissa bits, to nearest with ties away from zero (`cvt_rna_tf32_f32`); `a` is row-major `[m, k]` and `b`
row-major `[k, n]`, as the matmul task gives them. The products of TF32 values are exact in f32, so the result
differs from the f32 product by the inputs' rounding (a relative 2^-11 of each) and the f32 accumulation.

What differs from the f16 kernel:

- **Tiles.** Steps of `BLOCK_K` = 32 f32s: an `a` row is one 128-byte line, copied in chunks of 4 elements; the
  `b` tile is `fragments.tf32_b_tile`, its rows padded by 32 bytes, so that the 4 rows at 8 columns a B fragment
  load reads lie on 32 different banks (a 128-byte swizzle puts two rows' chunks on the same banks). No register
  cap: one block an SM (the 99 KB of shared memory of 3 stages fit once on an A100 anyway).
- **Rounding.** Once the copy of a step has landed, each thread rounds the chunks it copied to TF32 in place
  (`TileCopy.round_tf32`) before the step's barrier: each element is rounded once, where rounding each fragment
  element would round an `a` element once for every warp column and a `b` element once for every warp row. The
  tensor cores read only an operand's upper 19 bits (truncation): fed rounded values, they multiply exactly those.
- **Fragments.** `ldmatrix_x4` reads the A fragments (those of 32-bit elements are TF32's); the B fragments, of a
  row-major `[k, n]` tile that `ldmatrix` cannot transpose for 32-bit elements, are two 32-bit loads each
  (`fragments.load_b_tf32`).

The kernel follows the kernel contract: `a` and `b` are only read element by element or as the source of a
`cp_async` (a fused prologue turns those into element reads), `c` is only stored element by element or by
`copy_vector` under `address_aligned`. The 16-byte
copies assume that the tensors' data start at 16-byte aligned addresses (as every allocation does).
`MATMUL_CUDA_TF32_SPACE` is what `ops.tune` searches.
"""

from __future__ import annotations

from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir.types import float32
from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import MATMUL_CUDA_F16_MMA_SPACE, default_tiles, mma_matmul
from stdlib_ops.templates.params import Size, check_sizes
from stdlib_ops.templates.space import TuningSpace, declare_space

MATMUL_CUDA_TF32_SPACE = TuningSpace(
    {"block_m": (None, 128, 64, 256), "block_n": (None, 128, 64, 256), "warp_m": (None, 64, 32),
     "warp_n": (None, 32, 64), "stages": (3, 2, 4)},
    default={"block_m": None, "block_n": None, "warp_m": None, "warp_n": None, "stages": 3},
    constraint=MATMUL_CUDA_F16_MMA_SPACE.constraint,  # the same tiles: all chosen by size, or 4 to 16 warps
)
"""The tuning space (`ops.tune`): the block and warp tiles (None for all four: chosen by the problem's size,
`matmul_cuda_f16_mma.default_tiles`) and the number of shared buffers of the copy pipeline (3 by default: 96 KB
at 128 x 128, within an sm_80 block's shared memory)."""


@declare_space(MATMUL_CUDA_TF32_SPACE)
def matmul_cuda_tf32(batch: Size, m: Size, n: Size, k: Size, *, block_m: int | None = None,
                     block_n: int | None = None, warp_m: int | None = None, warp_n: int | None = None,
                     stages: int = 3) -> ScriptModule:
    """A module with one kernel `matmul(<symbolic sizes>, a, b, c)` computing `c = a @ b` in TF32 on the tensor
    cores, accumulating in f32.

    `a: f32[batch, m, k]`, `b: f32[batch, k, n]`, `c: f32[batch, m, n]`; each size is an int or a symbolic
    name. A block has `32 * (block_m / warp_m) * (block_n / warp_n)` threads; `warp_m` is a multiple of 16,
    `warp_n` of 8, the block tile sides powers of two (`block_n` at least 32); when the four tile sizes are None,
    `default_tiles` chooses them. `stages` shared buffers (2 to 8) pipeline the copies."""
    name = "matmul_cuda_tf32"
    check_sizes(name, {"batch": batch, "m": m, "n": n, "k": k})
    if block_m is None and block_n is None and warp_m is None and warp_n is None:
        block_m, block_n, warp_m, warp_n = default_tiles(batch, m, n)
    return mma_matmul(name, float32, float32, batch, m, n, k, (block_m, block_n, warp_m, warp_n), stages)
