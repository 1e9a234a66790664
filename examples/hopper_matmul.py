"""A Hopper (sm_90a) matmul: TMA copies into swizzled shared memory, mbarriers, and warpgroup MMA (wgmma).

C[M, N] = A[M, K] @ B[K, N] with f16 inputs, f32 accumulation and an f32 or f16 output. Each block computes a
64x64 tile of C with one warpgroup (128 threads):

- **TMA.** A and B are kernel parameters of type `TensorMap`: the tensor memory accelerator copies a 64x64 box of
  each into shared memory in one instruction issued by one thread, placing it with the 128-byte swizzle. A box that
  hangs over the matrix's edge is filled with zeros, so odd M, N and K need no special code in the main loop.
- **mbarriers.** A copy completes its bytes on an mbarrier (`mbarrier_arrive_expect_tx` says how many to expect);
  the threads wait on the barrier's phase before reading the tile.
- **A 2-stage ring.** Two buffers for A and two for B: while the tensor cores multiply the tiles of one step, TMA
  fills the other buffers with the step after.
- **wgmma.** For each 16-deep slice of the 64-deep k step, the warpgroup issues `wgmma_mma_async` (m64n64k16)
  with two shared-memory descriptors: A's tile is K-major (its rows run along k), B's tile is MN-major (B is
  row-major [K, N], so its tile's rows run along n: `transposed=True`, `trans_b=True`).
- **Epilogue.** Thread t's accumulator holds the elements (wgmma_accumulator_row(t, r), wgmma_accumulator_col(t, r))
  of the 64x64 tile; each is stored where it falls inside C.

TMA also needs the matrices' rows to span a multiple of 16 bytes: `matmul` pads K and N to multiples of 8 with
zero columns before the launch (the padding adds nothing to the product).

Run: python examples/hopper_matmul.py   (on the CUDA emulator where there is no GPU: small sizes there)
"""

from __future__ import annotations

import time

import numpy as np

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, f16, f32, i32, meta, u64, view
from hidet_lang.cuda import (
    TensorMap,
    blockIdx,
    fence_mbarrier_init,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait,
    shared_tensor,
    swizzled_layout,
    syncthreads,
    threadIdx,
    tma_box_bytes,
    tma_load,
    wgmma_accumulator,
    wgmma_accumulator_col,
    wgmma_accumulator_row,
    wgmma_commit_group,
    wgmma_descriptor,
    wgmma_fence,
    wgmma_mma_async,
    wgmma_wait_group,
)
from hidet_lang.ir.types import TensorType

TILE = 64  # the block's tile of C is TILE x TILE; a k step is TILE deep (128 bytes of f16: one swizzle row)
STAGES = 2  # buffers of the ring
WGMMA_K = 16  # the depth of one wgmma
SWIZZLED_TILE = TensorType(f16, (TILE, TILE), swizzled_layout([TILE, TILE], f16, swizzle=128))


def build_matmul(out_dtype=f32):
    """The module of the kernel `matmul(m, n, k, a, b, c)`: c = a @ b for f16 `a [m, k]`, `b [k, n]` (k and n
    multiples of 8) and `c [m, n]` of `out_dtype` (f32 or f16), built for sm_90a."""
    with hidet.script_module() as module:

        @hidet.script
        def matmul(m: i32, n: i32, k: i32,
                   a: TensorMap(f16, [m, k], box=[TILE, TILE], swizzle=128),  # noqa: F821 (parameters)
                   b: TensorMap(f16, [k, n], box=[TILE, TILE], swizzle=128),  # noqa: F821
                   c: out_dtype[m, n]):  # noqa: F821
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 128  # one warpgroup
            attrs.cuda.grid_dim = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
            # the ring: STAGES tiles of A and of B, each 64x64 f16 swizzled by 128 bytes, and one barrier a stage
            smem_a = shared_tensor(f16, layout=swizzled_layout([STAGES * TILE, TILE], f16, swizzle=128))
            smem_b = shared_tensor(f16, layout=swizzled_layout([STAGES * TILE, TILE], f16, swizzle=128))
            full = shared_tensor(u64, [STAGES])
            t = threadIdx.x
            m0 = blockIdx.y * TILE
            n0 = blockIdx.x * TILE
            steps = (k + TILE - 1) // TILE
            if t == 0:
                for s in meta.range(STAGES):
                    mbarrier_init(~full[s], 1)  # one arrival a phase: the thread that issues the copies
                fence_mbarrier_init()
            syncthreads()
            if t == 0:  # fill the ring: steps 0 and 1
                for s in meta.range(STAGES):
                    if s < steps:
                        mbarrier_arrive_expect_tx(~full[s], tma_box_bytes(a) + tma_box_bytes(b))
                        tma_load(~smem_a[s * TILE, 0], a, [m0, s * TILE], ~full[s])
                        tma_load(~smem_b[s * TILE, 0], b, [s * TILE, n0], ~full[s])

            acc = wgmma_accumulator(TILE)  # 32 f32 registers a thread: the 64x64 tile of C
            for r in meta.range(TILE // 2):
                acc[wgmma_accumulator_row(t, r), wgmma_accumulator_col(t, r)] = 0.0
            for step in range(steps):
                s = step % STAGES
                mbarrier_wait(~full[s], step // STAGES % 2)  # the copies of this step have landed
                tile_a = view(~smem_a[s * TILE, 0], SWIZZLED_TILE)  # [m, k]: K-major
                tile_b = view(~smem_b[s * TILE, 0], SWIZZLED_TILE)  # [k, n]: MN-major
                wgmma_fence()  # the accumulators' registers were written before
                for kk in meta.range(TILE // WGMMA_K):
                    wgmma_mma_async(acc, wgmma_descriptor(tile_a, k=kk * WGMMA_K),
                                    wgmma_descriptor(tile_b, k=kk * WGMMA_K, transposed=True), trans_b=True)
                wgmma_commit_group()
                wgmma_wait_group(0, acc)  # the products are in acc, and the tensor cores are done with stage s
                syncthreads()  # ... for every warp of the warpgroup: the stage may be refilled
                if t == 0 and step + STAGES < steps:
                    ahead = (step + STAGES) * TILE
                    mbarrier_arrive_expect_tx(~full[s], tma_box_bytes(a) + tma_box_bytes(b))
                    tma_load(~smem_a[s * TILE, 0], a, [m0, ahead], ~full[s])
                    tma_load(~smem_b[s * TILE, 0], b, [ahead, n0], ~full[s])

            for r in meta.range(TILE // 2):  # the epilogue: each accumulator where it falls inside C
                i = wgmma_accumulator_row(t, r)
                j = wgmma_accumulator_col(t, r)
                if m0 + i < m and n0 + j < n:
                    c[m0 + i, n0 + j] = out_dtype(acc[i, j])

    return module.build(target="cuda:sm_90a")


def padded_columns(x: np.ndarray, multiple: int = 8) -> np.ndarray:
    """`x` with zero columns appended up to a multiple of `multiple` (TMA's rows span multiples of 16 bytes)."""
    extra = -x.shape[1] % multiple
    return np.pad(x, ((0, 0), (0, extra))) if extra else x


def matmul(built, a: np.ndarray, b: np.ndarray, out_dtype=np.float32) -> np.ndarray:
    """a @ b through the kernel `built["matmul"]`, for f16 matrices of any sizes."""
    m, k = a.shape
    n = b.shape[1]
    a_padded = padded_columns(a)  # K padded: zero columns of A ...
    b_padded = padded_columns(np.pad(b, ((0, a_padded.shape[1] - k), (0, 0))))  # ... meet zero rows of B
    c = np.zeros((m, b_padded.shape[1]), out_dtype)
    built["matmul"](m, b_padded.shape[1], a_padded.shape[1], a_padded, b_padded, c)
    return c[:, :n]


def main() -> None:
    on_gpu = backend() == "gpu"
    sizes = [(1000, 1016, 999), (4096, 4096, 4096)] if on_gpu else [(70, 72, 136), (33, 50, 27)]
    modules = {np.float32: build_matmul(f32), np.float16: build_matmul(f16)}
    rng = np.random.default_rng(0)
    for m, n, k in sizes:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        for out_dtype, built in modules.items():
            start = time.perf_counter()
            c = matmul(built, a, b, out_dtype)
            elapsed = time.perf_counter() - start
            # products of f16 are exact in f32; k sums in f32 err by at most (k + 1) 2^-24 of the sum of the
            # products' sizes, and an f16 output is rounded once more (2^-11 of that sum, plus half f16's
            # smallest subnormal step)
            rounding = 2.0**-11 if out_dtype is np.float16 else 0.0
            bound = ((k + 1) * 2.0**-24 + rounding) * scale + (2.0**-25 if out_dtype is np.float16 else 0.0)
            error = np.abs(c.astype(np.float64) - exact)
            assert np.all(error <= bound), f"{m}x{n}x{k} {np.dtype(out_dtype)}: error {error.max()}"
            print(f"{m}x{n}x{k} -> {np.dtype(out_dtype).name}: matches numpy "
                  f"({elapsed * 1e3:.1f} ms on {backend()})")
    print("the Hopper matmul matches numpy")


if __name__ == "__main__":
    main()
