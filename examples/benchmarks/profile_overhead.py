"""What the emulator's profile build costs when no profile is open: nothing measurable.

Outside `hidet.cuda.profile()` an emulated CUDA module runs its own library, built without the counting (the
profile build is a separate library, compiled with -DHL_EMU_PROFILE, made only when a profile first calls the
module); the one thing a call does besides is to look whether a profile is open. This script times the same
calls of a small element-wise kernel (where a call's fixed costs weigh most) and of a tiled matmul:
- "plain": the library's own function, called without the module's dispatch (`m.functions[...]`);
- "module": the module's call, which looks for an open profile first (what every call does);
- "profiled": inside a profile (the counting build, for scale).
Medians of timed loops, "plain" and "module" in alternating turns (`timing.in_turns`), and each ratio to
"plain". Run: `python examples/benchmarks/profile_overhead.py`.
"""

from __future__ import annotations

import statistics

import numpy as np
from timing import in_turns  # examples/benchmarks/timing.py, beside this script

import hidet_lang as hidet
from hidet_lang import attrs, f32
from hidet_lang.cuda import blockIdx, shared_tensor, syncthreads, threadIdx

N = 1 << 16
T = 16  # the matmul's tile
M = 128

with hidet.script_module() as vector_module:
    @hidet.script
    def vec_add(a: f32[N], b: f32[N], c: f32[N]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 256
        attrs.cuda.grid_dim = N // 256
        i = blockIdx.x * 256 + threadIdx.x
        c[i] = a[i] + b[i]

with hidet.script_module() as matmul_module:
    @hidet.script
    def tiled(a: f32[M, M], b: f32[M, M], c: f32[M, M]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (T, T)
        attrs.cuda.grid_dim = (M // T, M // T)
        sa = shared_tensor(f32, [T, T])
        sb = shared_tensor(f32, [T, T])
        row = blockIdx.y * T + threadIdx.y
        col = blockIdx.x * T + threadIdx.x
        acc = 0.0
        for k0 in range(0, M, T):
            sa[threadIdx.y, threadIdx.x] = a[row, k0 + threadIdx.x]
            sb[threadIdx.y, threadIdx.x] = b[k0 + threadIdx.y, col]
            syncthreads()
            for k in range(T):
                acc += sa[threadIdx.y, k] * sb[k, threadIdx.x]
            syncthreads()
        c[row, col] = acc


def main() -> None:
    rows = []
    for name, module, shape, runs in (("vec_add", vector_module, (N,), 21), ("tiled matmul", matmul_module,
                                                                               (M, M), 9)):
        m = module.build(target="cuda")
        args = [np.random.rand(*shape).astype(np.float32) for _ in range(3)]
        plain = m.functions[next(iter(m.functions))]
        samples = in_turns({"plain": lambda f=plain, a=args: f(*a), "module": lambda f=m, a=args: f(*a)}, runs)
        with hidet.cuda.profile():
            samples |= in_turns({"profiled": lambda f=m, a=args: f(*a)}, 3)
        rows.append((name, {key: statistics.median(seconds) for key, seconds in samples.items()}))
    print(f"{'kernel':<14} {'plain (us)':>11} {'module (us)':>12} {'ratio':>7} {'profiled (us)':>14} {'ratio':>8}")
    for name, t in rows:
        print(f"{name:<14} {t['plain'] * 1e6:>11.1f} {t['module'] * 1e6:>12.1f} {t['module'] / t['plain']:>7.3f} "
              f"{t['profiled'] * 1e6:>14.1f} {t['profiled'] / t['plain']:>8.1f}")


if __name__ == "__main__":
    main()
