"""A faster CUDA matrix product: shared-memory tiles copied with `auto_map`, and an accumulator in registers
whose layout mirrors the task mapping that assigns its elements to threads.

A block of 256 threads (4 x 2 warps) computes a 64 x 256 tile of C. The mapping
`spatial(4, 2).repeat(2, 2).spatial(2, 16).repeat(4, 4)` gives each thread 64 elements of the tile; the
register tensor's layout `local_layout(4, 2) * row_major(2, 2) * local_layout(2, 16) * row_major(4, 4)` has the
same shape (64, 256) but stores only the 64 elements a thread owns (the local parts are spread over threads),
so `regs_c[i, j]` is indexed with the mapping's task coordinates directly. A `relu` helper, called from the
kernel, becomes a device function.
"""

import numpy as np

import hidet_lang as hidet
from hidet_lang import as_tensor_pointer, attrs, float32, int32, register_tensor, shared_tensor
from hidet_lang.cuda import blockIdx, syncthreads, threadIdx
from hidet_lang.layout import local_layout, row_major
from hidet_lang.mapping import auto_map, spatial

warps_m, warps_n = 4, 2  # 4 x 2 warps
warp_m, warp_n = 2, 2  # each warp repeats 2 x 2 times
warp_map_m, warp_map_n = 2, 16  # the 32 threads of a warp as 2 x 16
thread_m, thread_n = 4, 4  # each thread repeats 4 x 4 times
block_m, block_n = warps_m * warp_m * warp_map_m * thread_m, warps_n * warp_n * warp_map_n * thread_n  # 64, 256
block_k = 8
threads = warps_m * warps_n * 32

with hidet.script_module() as script_module:

    @hidet.script
    def relu(x: float32) -> float32:
        return x if x > 0.0 else 0.0

    @hidet.script
    def matmul_relu(a_ptr: ~float32, b_ptr: ~float32, c_ptr: ~float32, m_size: int32, n_size: int32,
                    k_size: int32):
        attrs.func_name = "matmul_relu_kernel"
        attrs.cuda.block_dim = threads
        attrs.cuda.grid_dim = (m_size + block_m - 1) // block_m, (n_size + block_n - 1) // block_n
        a = as_tensor_pointer(a_ptr, float32, [m_size, k_size])
        b = as_tensor_pointer(b_ptr, float32, [k_size, n_size])
        c = as_tensor_pointer(c_ptr, float32, [m_size, n_size])
        smem_a = shared_tensor(float32, shape=[block_m, block_k])
        smem_b = shared_tensor(float32, shape=[block_k, block_n])
        regs_c = register_tensor(
            float32,
            layout=local_layout(warps_m, warps_n) * row_major(warp_m, warp_n) * local_layout(warp_map_m, warp_map_n)
            * row_major(thread_m, thread_n),
        )
        mma = spatial(warps_m, warps_n).repeat(warp_m, warp_n).spatial(warp_map_m, warp_map_n).repeat(
            thread_m, thread_n)
        for i, j in mma.on(threadIdx.x):
            regs_c[i, j] = 0.0
        for k_tile in range((k_size + block_k - 1) // block_k):
            for i, k in auto_map(block_m, block_k, workers=threads).on(threadIdx.x):
                gi, gk = i + blockIdx.x * block_m, k + k_tile * block_k
                smem_a[i, k] = a[gi, gk] if gi < m_size and gk < k_size else 0.0
            for k, j in auto_map(block_k, block_n, workers=threads).on(threadIdx.x):
                gk, gj = k + k_tile * block_k, j + blockIdx.y * block_n
                smem_b[k, j] = b[gk, gj] if gk < k_size and gj < n_size else 0.0
            syncthreads()
            for i, j in mma.on(threadIdx.x):
                for k in range(block_k):
                    regs_c[i, j] += smem_a[i, k] * smem_b[k, j]
            syncthreads()
        for i, j in mma.on(threadIdx.x):
            gi, gj = i + blockIdx.x * block_m, j + blockIdx.y * block_n
            if gi < m_size and gj < n_size:
                c[gi, gj] = relu(regs_c[i, j])


module = script_module.build()


def matmul_relu_numpy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """relu(a @ b) with the kernel above."""
    m_size, k_size = a.shape
    n_size = b.shape[1]
    c = np.empty((m_size, n_size), np.float32)
    module(a, b, c, m_size, n_size, k_size)
    return c


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for m, n, k in [(64, 256, 8), (100, 300, 37), (32, 32, 32)]:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        # float32 sums of k products in another order than numpy's BLAS
        np.testing.assert_allclose(matmul_relu_numpy(a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    print("efficient matmul + relu matches numpy")
