"""The profiles of a naive and a tiled CUDA matmul, counted on the CUDA emulator (no GPU needed).

The naive kernel gives each thread one element of C and reads its row of A and its column of B from global memory;
its threads are laid out with `threadIdx.x` along the rows of C, so the 32 lanes of a warp read A down a column
(16 rows: 16 sectors where 2 hold the bytes asked for) and store C the same way. The tiled kernel copies 16x16
tiles of A and B into shared memory with the lanes along the rows, then multiplies them from there: every global
access is coalesced, and the shared reads are broadcasts or rows (one wavefront each).

`hidet.cuda.profile()` counts what each line's memory instructions touched; printed, it lists the lines by waste
(how many times the ideal sectors or wavefronts they took), then each kernel's instructions and the lower bound on
its time on the reference part of its architecture. The summary puts the two kernels side by side.

Run: python examples/profile_matmul.py
"""

from __future__ import annotations

import numpy as np

import hidet_lang as hidet
from hidet_lang import attrs, f32, shared_tensor, spatial
from hidet_lang.cuda import blockIdx, syncthreads, threadIdx
from hidet_lang.cuda.profile_report import Profile

T = 16  # a block computes a T x T tile of C with T * T threads
M = N = K = 128
by_columns = spatial(T, T)  # thread t -> (t // T, t % T): the second index varies fastest along a warp

with hidet.script_module() as naive_module:

    @hidet.script
    def naive(a: f32[M, K], b: f32[K, N], c: f32[M, N]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = T * T
        attrs.cuda.grid_dim = (M // T, N // T)
        row = blockIdx.x * T + threadIdx.x % T  # lanes along the rows of C: a warp reads A down a column
        col = blockIdx.y * T + threadIdx.x // T
        acc = 0.0
        for kk in range(K):
            x = a[row, kk]
            acc += x * b[kk, col]
        c[row, col] = acc

with hidet.script_module() as tiled_module:

    @hidet.script
    def tiled(a: f32[M, K], b: f32[K, N], c: f32[M, N]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = T * T
        attrs.cuda.grid_dim = (N // T, M // T)
        sa = shared_tensor(f32, [T, T])
        sb = shared_tensor(f32, [T, T])
        for i, j in by_columns.on(threadIdx.x):
            row = blockIdx.y * T + i
            col = blockIdx.x * T + j
            acc = 0.0
            for k0 in range(0, K, T):
                sa[i, j] = a[row, k0 + j]
                sb[i, j] = b[k0 + i, col]
                syncthreads()
                for kk in range(T):
                    acc += sa[i, kk] * sb[kk, j]
                syncthreads()
            c[row, col] = acc


def summary(profiles: dict[str, Profile]) -> str:
    """The kernels of `profiles` side by side: warp-level global and shared requests, the 32-byte sectors and the
    wavefronts they took, and the lower bound on each kernel's time."""
    rows = [("kernel", "global requests", "sectors", "shared requests", "wavefronts", "time >=", "bound by")]
    for name, p in profiles.items():
        (kernel,) = p.kernels()
        records = p.lines()
        bound = kernel.bound()
        rows.append((name, str(sum(r.requests for r in records if r.space == "global")), str(kernel.global_sectors),
                     str(sum(r.requests for r in records if r.space == "shared")), str(kernel.shared_wavefronts),
                     f"{bound.seconds * 1e6:.3g} us", bound.binding))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if i in (0, 6) else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows)


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    profiles = {}
    for name, module in (("naive", naive_module), ("tiled", tiled_module)):
        built = module.build(target="cuda:sm_80")
        c = np.zeros((M, N), np.float32)
        with hidet.cuda.profile() as p:
            built(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
        print(f"{name} {M}x{N}x{K}:\n{p}\n")
        profiles[name] = p
    print(summary(profiles))
    print("both kernels match numpy")


if __name__ == "__main__":
    main()
