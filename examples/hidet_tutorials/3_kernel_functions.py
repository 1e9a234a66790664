"""Function kinds: a `cpu_kernel` and a `cuda_kernel` computing a matrix product, with Hidet's tensor helpers.

`public` and the kernel kinds are callable from Python; `cpu_internal` and `cuda_internal` functions are called
by other script functions (CUDA's `__device__`). A module whose only host-callable function is a kernel is
called directly: for a CUDA kernel that call launches it with the grid and block it declares.
"""

import numpy as np

import hidet_lang as hidet
from hidet_lang import attrs
from hidet_lang.cuda import blockDim, blockIdx, threadIdx
from hidet_lang.types import f32

with hidet.script_module() as cpu_module:

    @hidet.script
    def matmul16(a: f32[16, 16], b: f32[16, 16], c: f32[16, 16]):
        attrs.func_kind = "cpu_kernel"
        for i in range(16):
            for j in range(16):
                c[i, j] = 0.0
                for k in range(16):
                    c[i, j] += a[i, k] * b[k, j]


m_size, n_size, k_size = 200, 100, 60

with hidet.script_module() as cuda_module:

    @hidet.script
    def matmul(a: f32[m_size, k_size], b: f32[k_size, n_size], c: f32[m_size, n_size]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.grid_dim = (m_size + 15) // 16, (n_size + 15) // 16
        attrs.cuda.block_dim = 16, 16
        i = blockIdx.x * blockDim.x + threadIdx.x
        j = blockIdx.y * blockDim.y + threadIdx.y
        if i < m_size and j < n_size:
            c[i, j] = 0.0
            for k in range(k_size):
                c[i, j] += a[i, k] * b[k, j]


if __name__ == "__main__":
    a, b, c = hidet.randn([16, 16]), hidet.randn([16, 16]), hidet.empty([16, 16])
    cpu_module.build()(a, b, c)
    # float32 sums of 16 products, which numpy's BLAS may add in another order
    np.testing.assert_allclose(c.numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)

    a = hidet.randn([m_size, k_size], device="cuda")
    b = hidet.randn([k_size, n_size], device="cuda")
    c = hidet.empty([m_size, n_size], device="cuda")
    cuda_module.build()(a, b, c)
    # float32 sums of k_size products, in another order than numpy's BLAS
    np.testing.assert_allclose(c.numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5 * k_size)
    print("cpu_kernel and cuda_kernel match numpy")
