"""The batched half-precision matmul template on the tensor cores: `mma_m16n8k16_f16_f32` fed by `ldmatrix_x4`.

`c[b, i, j] = sum_k a[b, i, k] * b[b, k, j]` with f16 inputs, f32 accumulation, and an f16 or f32 output. A block
of `warps_m x warps_n` warps computes a `(warps_m * 16 * mma_m) x (warps_n * 8 * mma_n)` tile; each warp owns
`mma_m x mma_n` tensor-core tiles of 16 x 8. Along k, steps of 16: the block copies the tiles of `a` and `b` into
shared memory by element reads (zeros outside the matrices, so every shape is correct), each warp loads its A
fragments with `ldmatrix_x4` and its B fragments element by element (the m16n8k16 layout: lane l holds rows
2(l % 4) + e % 2 + 8(e / 2) of column l / 4), and issues the mma instructions. The accumulator fragments are
stored element by element where they fall inside `c`.

The kernel follows the kernel contract: `a` and `b` are only read element by element, `c` only stored element by
element, so prologues and epilogues fuse into it like into any other template.
"""

from __future__ import annotations

from hidet_lang import attrs, auto_map, f16, f32, i32, register_tensor, repeat, script, script_module, spatial, u32
from hidet_lang.cuda import blockIdx, ldmatrix_x4, mma_m16n8k16_f16_f32, shared_tensor, syncthreads, threadIdx
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.sizes import bind_sizes

MMA_M, MMA_N, MMA_K = 16, 8, 16
MMA_OUTPUT_DTYPES = ("float16", "float32")


def matmul_cuda_f16_mma(batch: Size, m: Size, n: Size, k: Size, out_dtype: str = "float16", *, warps_m: int = 2,
                        warps_n: int = 2, mma_m: int = 2, mma_n: int = 4) -> ScriptModule:
    """A module with one kernel `matmul(<symbolic sizes>, a, b, c)` computing `c = a @ b` on the tensor cores.

    `a: f16[batch, m, k]`, `b: f16[batch, k, n]`, `c: out_dtype[batch, m, n]`; each size is an int or a symbolic
    name. A block has `32 * warps_m * warps_n` threads.
    """
    name = "matmul_cuda_f16_mma"
    check_sizes(name, {"batch": batch, "m": m, "n": n, "k": k})
    out = template_dtype(name, out_dtype, MMA_OUTPUT_DTYPES)
    threads = 32 * warps_m * warps_n
    require(threads <= 1024, name, f"{threads} threads a block (at most 1024)")
    require(min(mma_m, mma_n) >= 1, name, "each warp needs at least one mma tile")
    warp_m, warp_n = MMA_M * mma_m, MMA_N * mma_n
    block_m, block_n = warps_m * warp_m, warps_n * warp_n
    warp_grid = spatial(warps_m, warps_n)
    mma_tiles = repeat(mma_m, mma_n)
    load_a = auto_map(block_m, MMA_K, workers=threads)
    load_b = auto_map(MMA_K, block_n, workers=threads)

    with script_module() as module:

        @script
        def matmul(batch: i32, m: i32, n: i32, k: i32, a: f16[batch, m, k], b: f16[batch, k, n],
                   c: out[batch, m, n]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            # one grid dimension (x allows 2**31 - 1 blocks; y and z only 65535, fewer than a batch may need)
            attrs.cuda.grid_dim = (n + block_n - 1) // block_n * ((m + block_m - 1) // block_m) * batch
            smem_a = shared_tensor(f16, [block_m, MMA_K])
            smem_b = shared_tensor(f16, [MMA_K, block_n])
            ra = register_tensor(u32, [mma_m, 4])
            rb = register_tensor(f16, [mma_n, 4])
            acc = register_tensor(f32, [mma_m, mma_n, 4])
            for mi, ni in mma_tiles.on(0):
                for e in range(4):
                    acc[mi, ni, e] = 0.0
            tiles_n = (n + block_n - 1) // block_n
            tiles_m = (m + block_m - 1) // block_m
            bi = blockIdx.x // (tiles_n * tiles_m)
            m0 = blockIdx.x // tiles_n % tiles_m * block_m
            n0 = blockIdx.x % tiles_n * block_n
            lane = threadIdx.x % 32
            for wi, wj in warp_grid.on(threadIdx.x // 32):
                wm = wi * warp_m
                wn = wj * warp_n
                for k0 in range(0, k, MMA_K):
                    for i, kk in load_a.on(threadIdx.x):
                        inside = m0 + i < m and k0 + kk < k
                        smem_a[i, kk] = a[bi, m0 + i, k0 + kk] if inside else f16(0.0)
                    for kk, j in load_b.on(threadIdx.x):
                        inside = k0 + kk < k and n0 + j < n
                        smem_b[kk, j] = b[bi, k0 + kk, n0 + j] if inside else f16(0.0)
                    syncthreads()
                    for mi in range(mma_m):
                        # lane l addresses row l % 8 of the 8x8 matrix l / 8: rows 0-7 / 8-15, columns 0-7 / 8-15
                        row = wm + mi * MMA_M + lane % 8 + 8 * (lane // 8 % 2)
                        ldmatrix_x4(~ra[mi, 0], ~smem_a[row, 8 * (lane // 16)])
                    for ni in range(mma_n):
                        for e in range(4):
                            rb[ni, e] = smem_b[2 * (lane % 4) + e % 2 + 8 * (e // 2), wn + ni * MMA_N + lane // 4]
                    for mi, ni in mma_tiles.on(0):
                        mma_m16n8k16_f16_f32(~ra[mi, 0], ~rb[ni, 0], ~acc[mi, ni, 0])
                    syncthreads()
                for mi, ni in mma_tiles.on(0):
                    for e in range(4):
                        i = m0 + wm + mi * MMA_M + lane // 4 + 8 * (e // 2)
                        j = n0 + wn + ni * MMA_N + 2 * (lane % 4) + e % 2
                        if i < m and j < n:
                            c[bi, i, j] = out(acc[mi, ni, e])

    return bind_sizes(module, "matmul", {"batch": batch, "m": m, "n": n, "k": k})
