"""A CUDA matrix product for any size: pointer parameters viewed as tensors of runtime shapes."""

import numpy as np

import hidet_lang as hidet
from hidet_lang import attrs
from hidet_lang.cuda import blockIdx, threadIdx
from hidet_lang.types import f32, i32, tensor_pointer

with hidet.script_module() as script_module:

    @hidet.script
    def matmul_kernel(a_ptr: ~f32, b_ptr: ~f32, c_ptr: ~f32, m_size: i32, n_size: i32, k_size: i32):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 16, 16
        attrs.cuda.grid_dim = (m_size + 15) // 16, (n_size + 15) // 16
        a = tensor_pointer(dtype=f32, shape=[m_size, k_size], init=a_ptr)
        b = tensor_pointer(dtype=f32, shape=[k_size, n_size], init=b_ptr)
        c = tensor_pointer(dtype=f32, shape=[m_size, n_size], init=c_ptr)
        i = blockIdx.x * 16 + threadIdx.x
        j = blockIdx.y * 16 + threadIdx.y
        if i < m_size and j < n_size:
            c[i, j] = 0.0
            for k in range(k_size):
                c[i, j] += a[i, k] * b[k, j]


module = script_module.build()


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b with the kernel above."""
    m_size, k_size = a.shape
    n_size = b.shape[1]
    c = np.empty((m_size, n_size), np.float32)
    module(a, b, c, m_size, n_size, k_size)
    return c


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for m, n, k in [(34, 45, 67), (23, 56, 89)]:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        # float32 sums of k products in another order than numpy's BLAS
        np.testing.assert_allclose(matmul(a, b), a @ b, rtol=1e-5, atol=1e-5 * k)
    print("naive matmul matches numpy for runtime sizes")
