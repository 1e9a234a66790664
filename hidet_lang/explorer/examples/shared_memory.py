import hidet_lang as hidet
from hidet_lang import attrs, f32, i32, shared_tensor, spatial, strided_layout
from hidet_lang.cuda import blockIdx, syncthreads, threadIdx

T = 16
threads = spatial(T, T)  # thread t owns the cell (t // 16, t % 16) of the block's tile
padded = strided_layout([T, T], strides=[T + 1, 1])  # a's tile with each row padded by one element

with hidet.script_module() as module:

    @hidet.script
    def matmul(m: i32, n: i32, k: i32, a: f32[m, k], b: f32[k, n], c: f32[m, n]):  # noqa: F821 (parameters)
        attrs.cuda.block_dim = T * T
        attrs.cuda.grid_dim = ((n + T - 1) // T, (m + T - 1) // T)
        sa = shared_tensor(f32, layout=padded)
        sb = shared_tensor(f32, [T, T])
        for i, j in threads.on(threadIdx.x):
            row = blockIdx.y * T + i
            col = blockIdx.x * T + j
            acc = 0.0
            for k0 in range(0, k, T):
                sa[i, j] = a[row, k0 + j] if row < m and k0 + j < k else 0.0
                sb[i, j] = b[k0 + i, col] if k0 + i < k and col < n else 0.0
                syncthreads()
                for kk in range(T):
                    acc += sa[i, kk] * sb[kk, j]
                syncthreads()
            if row < m and col < n:
                c[row, col] = acc
