"""A shared-memory tiled matmul for CUDA whose thread-to-data assignments are all task mappings.

Each block computes a 64x64 tile of C with 256 threads. Per step along K, the threads copy a 64x8 tile of A
and an 8x64 tile of B into shared memory (`auto_map` spreads each copy over the 256 threads), then every
thread accumulates a 4x4 patch of the tile (`spatial(16, 16) * repeat(4, 4)`: 16x16 threads, 4x4 tasks each)
in registers. Runs on the GPU when there is one, otherwise on the CUDA emulator.

Run: python examples/cuda_matmul.py
"""

from __future__ import annotations

import time

import numpy as np

import hidet_lang as hidet
from hidet_lang import attrs, auto_map, f32, i32, register_tensor, repeat, spatial
from hidet_lang.cuda import blockIdx, shared_tensor, syncthreads, threadIdx

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 8
THREADS = 256
tile = spatial(16, 16) * repeat(4, 4)  # each of the 256 threads owns a 4x4 patch of the 64x64 tile
load_a = auto_map(BLOCK_M, BLOCK_K, workers=THREADS)
load_b = auto_map(BLOCK_K, BLOCK_N, workers=THREADS)

with hidet.script_module() as module:

    @hidet.script
    def matmul(m: i32, n: i32, k: i32, a: f32[m, k], b: f32[k, n], c: f32[m, n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = THREADS
        attrs.cuda.grid_dim = ((n + BLOCK_N - 1) // BLOCK_N, (m + BLOCK_M - 1) // BLOCK_M)
        smem_a = shared_tensor(f32, [BLOCK_M, BLOCK_K])
        smem_b = shared_tensor(f32, [BLOCK_K, BLOCK_N])
        acc = register_tensor(f32, [4, 4])
        for i, j in repeat(4, 4).on(0):
            acc[i, j] = 0.0
        m0 = blockIdx.y * BLOCK_M
        n0 = blockIdx.x * BLOCK_N
        for k0 in range(0, k, BLOCK_K):
            for i, kk in load_a.on(threadIdx.x):
                inside = m0 + i < m and k0 + kk < k
                smem_a[i, kk] = a[m0 + i, k0 + kk] if inside else 0.0
            for kk, j in load_b.on(threadIdx.x):
                inside = k0 + kk < k and n0 + j < n
                smem_b[kk, j] = b[k0 + kk, n0 + j] if inside else 0.0
            syncthreads()
            for kk in range(BLOCK_K):
                for i, j in tile.on(threadIdx.x):
                    acc[i % 4, j % 4] += smem_a[i, kk] * smem_b[kk, j]
            syncthreads()
        for i, j in tile.on(threadIdx.x):
            if m0 + i < m and n0 + j < n:
                c[m0 + i, n0 + j] = acc[i % 4, j % 4]


def main() -> None:
    built = module.build()
    rng = np.random.default_rng(0)
    for m, n, k in ((64, 64, 8), (200, 150, 77), (256, 256, 256)):
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c = np.zeros((m, n), np.float32)
        start = time.perf_counter()
        built(m, n, k, a, b, c)
        elapsed = time.perf_counter() - start
        # float32 sums of k products in another order than BLAS: relative error ~ k * 2^-24
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
        print(f"{m}x{n}x{k}: matches numpy ({elapsed * 1e3:.1f} ms on {built.target})")


if __name__ == "__main__":
    main()
