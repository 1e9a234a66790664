"""The batched f32 matmul template on the tensor cores in TF32 (sm_80 and later), taken only where
`hidet.option.allow_tf32(True)` allows it: a pipeline of 16-byte `cp_async` copies into swizzled shared memory,
rounded to TF32 there, fragments read by plain shared loads, and `mma.m16n8k8` with f32 accumulation.

`c[b, i, j] = sum_k tf32(a[b, i, k]) * tf32(b[b, k, j])` with f32 inputs and output, where `tf32` rounds to 10
mantissa bits, to nearest with ties away from zero (`cvt_rna_tf32_f32`); `a` is row-major `[m, k]` and `b`
row-major `[k, n]`, as the matmul task gives them. The products of TF32 values are exact in f32, so the result
differs from the f32 product by the inputs' rounding (a relative 2^-11 of each) and the f32 accumulation.

- **Block tiles.** As `matmul_cuda_f16_mma` (its `default_tiles`): a block computes a `block_m x block_n` tile of
  one batch entry with `(block_m / warp_m) x (block_n / warp_n)` warps, 128 x 128 with 8 warps of 64 x 32 (or
  64 x 64 with 4 warps of 32 x 32 where those give a GPU too few blocks); a warp owns `(warp_m / 16) x
  (warp_n / 8)` mma tiles whose accumulators are register tensors indexed by constants. Blocks go over the tiles
  in groups of `GROUP_M` tile rows (`tile_order`), batch entries outermost. No register cap: the 128 x 128 tile
  takes about 160 registers a thread and spills none, one block an SM (the 96 KB of shared memory of 3 stages fit
  once on an A100 anyway); capped at 128 for two blocks an SM, NVRTC spills on sm_80.
- **Copies.** Along k, steps of `BLOCK_K` = 32: the tiles of `a` (`block_m x 32`) and `b` (`32 x block_n`) are
  copied into one of `stages` buffers of dynamic shared memory in chunks of 4 elements (16 bytes): one `cp_async`
  where the rows are a multiple of 4 elements long and the chunk lies inside the matrix, zeros where it lies
  outside, and element by element (zeros outside) where the rows are not a multiple of 4 long: every shape is
  correct. The copy of step s + stages - 1 is issued before step s is multiplied (one barrier a step).
- **Rounding.** Once the copy of a step has landed, each thread rounds the chunks it copied to TF32 in place
  (`cvt_rna_tf32_f32`: nearest, ties away from zero) before the step's barrier: each element is rounded once,
  where rounding each fragment element would round an `a` element once for every warp column and a `b` element
  once for every warp row. The tensor cores read only an operand's upper 19 bits (truncation): fed rounded
  values, they multiply exactly those.
- **Swizzle.** A 32-element row of the `a` tile is 8 chunks, one 128-byte line of banks: chunk `c` of row `r` is
  stored at `c ^ (r % 8)` (`swizzled_chunk(8)`), so that the 8 rows a fragment load reads (at one k) fall in 8
  different bank groups. In the `b` tile a fragment load reads 4 rows at 8 consecutive columns (two chunks):
  chunk `c` of row `r` is stored at `c ^ 2 (r % 4)` (`b_tile_chunk`), which puts those 8 chunks in 8 bank
  groups; eight consecutive chunks of a row (a quarter warp's copies) stay in eight groups too.
- **Fragments.** For each 8 of the 32 k, each lane reads its 4 `a` elements of each 16-row mma tile and its 2 `b`
  elements of each 8-column one (the PTX fragment layout of m16n8k8 tf32) with 32-bit shared loads, and issues
  its `mma_m16n8k8_tf32_f32` instructions. A fragment's rows lie at a fixed lane offset modulo the swizzle's
  period (g modulo 8 in `a`, t modulo 4 in `b`), so each lane's swizzled columns are computed once (`b_column`)
  or from constants.
- **Output.** The accumulators are stored into `c` element by element where they fall inside it, which is where a
  fused epilogue lands.

The kernel follows the kernel contract: `a` and `b` are only read element by element or as the source of a
`cp_async` (a fused prologue turns those into element reads), `c` is only stored element by element. The 16-byte
copies assume that the tensors' data start at 16-byte aligned addresses (as every allocation does).
`MATMUL_CUDA_TF32_SPACE` is what `ops.tune` searches.
"""

from __future__ import annotations

from hidet_lang import attrs, f32, i32, meta, register_tensor, script, script_module, tensor_pointer
from hidet_lang.cuda import (
    blockIdx,
    cp_async,
    cp_async_commit_group,
    cp_async_wait_group,
    cvt_rna_tf32_f32,
    dynamic_shared_memory,
    mma_m16n8k8_tf32_f32,
    syncthreads,
    threadIdx,
)
from hidet_lang.cuda_limits import shared_memory_per_block
from hidet_lang.frontend.script import ScriptFunction, ScriptModule
from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import (
    MATMUL_CUDA_F16_MMA_SPACE,
    default_tiles,
    swizzled_chunk,
)
from stdlib_ops.templates.kernels.tile_order import grouped_tile
from stdlib_ops.templates.params import Size, check_sizes, require
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.space import TuningSpace, declare_space

MMA_M, MMA_N, MMA_K = 16, 8, 8
BLOCK_K = 32  # k a step: four mma k steps, a 128-byte row of the a tile
CHUNK = 4  # f32 elements of a 16-byte copy chunk
MAX_SMEM_BYTES = shared_memory_per_block("sm_90")  # a block's most on an sm_90 GPU (sm_80: 163 KB)


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
    require(None not in (block_m, block_n, warp_m, warp_n), name,
            "give all four tile sizes (block_m, block_n, warp_m, warp_n) or none")
    assert block_m is not None and block_n is not None and warp_m is not None and warp_n is not None
    require(min(block_m, block_n, warp_m, warp_n) >= 1, name, "tile sizes must be positive")
    require(warp_m % MMA_M == 0 and warp_n % MMA_N == 0, name,
            "warp_m must be a multiple of 16 and warp_n of 8 (whole mma tiles)")
    require(block_m % warp_m == 0 and block_n % warp_n == 0, name, "warp tiles must divide the block tile")
    require(block_m & (block_m - 1) == 0 and block_n & (block_n - 1) == 0 and block_n >= 8 * CHUNK, name,
            "block_m and block_n must be powers of two (block_n at least 32)")
    require(2 <= stages <= 8, name, "stages must be 2 to 8")
    warps_n = block_n // warp_n
    threads = 32 * (block_m // warp_m) * warps_n
    require(threads <= 1024, name, f"{threads} threads a block (at most 1024)")
    chunks_a = block_m * BLOCK_K // CHUNK
    chunks_b = BLOCK_K * block_n // CHUNK
    smem_bytes = stages * (chunks_a + chunks_b) * 16
    require(smem_bytes <= MAX_SMEM_BYTES, name, f"{smem_bytes} bytes of shared memory (at most 227 KB)")
    mma_m, mma_n = warp_m // MMA_M, warp_n // MMA_N
    swizzle_a = swizzled_chunk(BLOCK_K // CHUNK)
    swizzle_b = b_tile_chunk()
    a_bytes = stages * block_m * BLOCK_K * 4  # the a buffers, then the b buffers

    with script_module() as module:

        @script
        def matmul(batch: i32, m: i32, n: i32, k: i32, a: f32[batch, m, k], b: f32[batch, k, n],
                   c: f32[batch, m, n]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            # one grid dimension (x allows 2**31 - 1 blocks; y and z only 65535, fewer than a batch may need)
            attrs.cuda.grid_dim = (n + block_n - 1) // block_n * ((m + block_m - 1) // block_m) * batch
            attrs.cuda.dynamic_smem_bytes = smem_bytes
            smem_a = tensor_pointer(f32, [stages, block_m, BLOCK_K], init=dynamic_shared_memory(0, f32))
            smem_b = tensor_pointer(f32, [stages, BLOCK_K, block_n], init=dynamic_shared_memory(a_bytes, f32))
            ra = register_tensor(f32, [mma_m, 4])
            rb = register_tensor(f32, [mma_n, 2])
            acc = register_tensor(f32, [mma_m, mma_n, 4])
            for mi in meta.range(mma_m):
                for ni in meta.range(mma_n):
                    for e in meta.range(4):
                        acc[mi, ni, e] = 0.0
            tiles_n = (n + block_n - 1) // block_n
            tiles_m = (m + block_m - 1) // block_m
            per_batch = tiles_m * tiles_n
            bi = blockIdx.x // per_batch
            tile_row: i32 = 0  # the block's tile: GROUP_M tile rows at a time, column by column (`tile_order`)
            tile_col: i32 = 0
            grouped_tile(blockIdx.x % per_batch, tiles_m, tiles_n, ~tile_row, ~tile_col)
            m0 = tile_row * block_m
            n0 = tile_col * block_n
            lane = threadIdx.x % 32
            g = lane // 4
            t = lane % 4
            wm = threadIdx.x // 32 // warps_n * warp_m
            wn = threadIdx.x // 32 % warps_n * warp_n
            # where column wn + 8 ni + g of a b tile row (t modulo 4) lies: its chunk ^ 2 t (b_tile_chunk)
            b_column = register_tensor(i32, [mma_n])
            for ni in meta.range(mma_n):
                b_column[ni] = ((wn + ni * MMA_N + g) // CHUNK ^ 2 * t) * CHUNK + g % CHUNK
            steps = (k + BLOCK_K - 1) // BLOCK_K
            for step in range(steps + stages - 1):  # copy step `step`, multiply step `step - stages + 1`
                cp_async_wait_group(stages - 2)  # the copy of the step multiplied now is in place
                if step >= stages - 1:  # this thread's chunks of it rounded to TF32 in place
                    buf = (step - stages + 1) % stages
                    for it in meta.range(-(-chunks_a // threads)):
                        q = threadIdx.x + it * threads
                        if chunks_a % threads == 0 or q < chunks_a:
                            row = q // (BLOCK_K // CHUNK)
                            at = swizzle_a(row, q % (BLOCK_K // CHUNK)) * CHUNK
                            for e in meta.range(CHUNK):
                                smem_a[buf, row, at + e] = cvt_rna_tf32_f32(smem_a[buf, row, at + e])
                    for it in meta.range(-(-chunks_b // threads)):
                        q = threadIdx.x + it * threads
                        if chunks_b % threads == 0 or q < chunks_b:
                            kk = q // (block_n // CHUNK)
                            at = swizzle_b(kk, q % (block_n // CHUNK)) * CHUNK
                            for e in meta.range(CHUNK):
                                smem_b[buf, kk, at + e] = cvt_rna_tf32_f32(smem_b[buf, kk, at + e])
                syncthreads()  # ... for every thread, and every thread is done with the buffer refilled now
                if step < steps:
                    fill = step % stages
                    k0 = step * BLOCK_K
                    for it in meta.range(-(-chunks_a // threads)):
                        q = threadIdx.x + it * threads
                        if chunks_a % threads == 0 or q < chunks_a:
                            row = q // (BLOCK_K // CHUNK)
                            kc = q % (BLOCK_K // CHUNK) * CHUNK
                            at = swizzle_a(row, q % (BLOCK_K // CHUNK)) * CHUNK
                            if k % CHUNK == 0:
                                if m0 + row < m and k0 + kc < k:
                                    cp_async(~smem_a[fill, row, at], ~a[bi, m0 + row, k0 + kc], 16)
                                else:
                                    for e in meta.range(CHUNK):
                                        smem_a[fill, row, at + e] = 0.0
                            else:
                                for e in meta.range(CHUNK):
                                    inside = m0 + row < m and k0 + kc + e < k
                                    smem_a[fill, row, at + e] = a[bi, m0 + row, k0 + kc + e] if inside else 0.0
                    for it in meta.range(-(-chunks_b // threads)):
                        q = threadIdx.x + it * threads
                        if chunks_b % threads == 0 or q < chunks_b:
                            kk = q // (block_n // CHUNK)
                            col = q % (block_n // CHUNK) * CHUNK
                            at = swizzle_b(kk, q % (block_n // CHUNK)) * CHUNK
                            if n % CHUNK == 0:
                                if k0 + kk < k and n0 + col < n:
                                    cp_async(~smem_b[fill, kk, at], ~b[bi, k0 + kk, n0 + col], 16)
                                else:
                                    for e in meta.range(CHUNK):
                                        smem_b[fill, kk, at + e] = 0.0
                            else:
                                for e in meta.range(CHUNK):
                                    inside = k0 + kk < k and n0 + col + e < n
                                    smem_b[fill, kk, at + e] = b[bi, k0 + kk, n0 + col + e] if inside else 0.0
                cp_async_commit_group()
                if step >= stages - 1:
                    buf = (step - stages + 1) % stages
                    for ks in meta.range(BLOCK_K // MMA_K):
                        for mi in meta.range(mma_m):
                            for r in meta.range(4):  # A[g + 8 (r % 2), t + 4 (r / 2)] of the mma tile
                                # the row is g modulo 8: its chunk 2 ks + r / 2 lies at that chunk ^ g
                                at = ((2 * ks + r // 2) ^ g) * CHUNK + t
                                ra[mi, r] = smem_a[buf, wm + mi * MMA_M + g + 8 * (r % 2), at]
                        for ni in meta.range(mma_n):
                            for r in meta.range(2):  # B[t + 4 r, g] of the mma tile (its column: b_column)
                                rb[ni, r] = smem_b[buf, ks * MMA_K + t + 4 * r, b_column[ni]]
                        for mi in meta.range(mma_m):
                            for ni in meta.range(mma_n):
                                mma_m16n8k8_tf32_f32(~ra[mi, 0], ~rb[ni, 0], ~acc[mi, ni, 0])
            for mi in meta.range(mma_m):
                for ni in meta.range(mma_n):
                    for e in meta.range(4):
                        i = m0 + wm + mi * MMA_M + g + 8 * (e // 2)
                        j = n0 + wn + ni * MMA_N + 2 * t + e % 2
                        if i < m and j < n:
                            c[bi, i, j] = acc[mi, ni, e]

    return bind_sizes(module, "matmul", {"batch": batch, "m": m, "n": n, "k": k})


def b_tile_chunk() -> ScriptFunction:
    """The `cuda_internal` function `tf32_b_chunk(row, chunk) -> i32`: where chunk `chunk` (4 f32s) of row `row`
    of the shared `b` tile (at least 8 chunks a row) is stored in that row: XORed with twice the row's index
    modulo 4, so that the two chunks of 8 columns in each of 4 consecutive rows lie in 8 different bank groups."""

    @script
    def tf32_b_chunk(row: i32, chunk: i32) -> i32:
        attrs.func_kind = "cuda_internal"
        attrs.func_name = "tf32_b_chunk"
        return chunk ^ (row % 4 * 2)

    return tf32_b_chunk

