"""Scheduled kernels that follow the kernel contract, written in the DSL, used as fusion anchors by the tests:
an elementwise kernel and a blocked matmul for the CPU, a tiled matmul with shared memory and cp_async double
buffering and a warp-per-row reduction for CUDA. Each has symbolic sizes, so one build serves every shape."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import hidet_lang as hidet
from hidet_lang import attrs, auto_map, f32, grid, i32, register_tensor, repeat, spatial
from hidet_lang.cuda import (
    blockIdx,
    cp_async,
    cp_async_commit_group,
    cp_async_wait_group,
    shared_tensor,
    shfl_xor_sync,
    syncthreads,
    threadIdx,
)
from hidet_lang.ir.func import IRModule

with hidet.script_module() as elementwise_module:

    @hidet.script
    def scale_shift(m: i32, n: i32, x: f32[m, n], y: f32[m, n]):  # noqa: F821 (parameters)
        attrs.func_kind = "public"
        for i, j in grid(m, n, attrs="p."):
            y[i, j] = x[i, j] * 2.0 + 1.0


with hidet.script_module() as cpu_matmul_module:

    @hidet.script
    def blocked_matmul(m: i32, k: i32, n: i32, a: f32[m, k], b: f32[k, n], c: f32[m, n]):  # noqa: F821
        attrs.func_kind = "public"
        for bi in grid((m + 7) // 8, attrs="p"):
            for bj in range((n + 7) // 8):
                acc = register_tensor(f32, [8, 8])
                for i, j in grid(8, 8):
                    acc[i, j] = 0.0
                for kk in range(k):
                    for i, j in grid(8, 8):
                        if bi * 8 + i < m and bj * 8 + j < n:
                            acc[i, j] += a[bi * 8 + i, kk] * b[kk, bj * 8 + j]
                for i, j in grid(8, 8):
                    if bi * 8 + i < m and bj * 8 + j < n:
                        c[bi * 8 + i, bj * 8 + j] = acc[i, j]


TILE = spatial(16, 8) * repeat(2, 4)  # 128 threads, each a 2x4 patch of the 32x32 tile of C
LOAD_B = auto_map(8, 32, workers=128)

with hidet.script_module() as cuda_matmul_module:

    @hidet.script
    def tiled_matmul(m: i32, k: i32, n: i32, a: f32[m, k], b: f32[k, n], c: f32[m, n]):  # noqa: F821
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 128
        attrs.cuda.grid_dim = ((n + 31) // 32, (m + 31) // 32)
        sa = shared_tensor(f32, [2, 32, 8])
        sb = shared_tensor(f32, [2, 8, 32])
        acc = register_tensor(f32, [2, 4])
        for i, j in grid(2, 4):
            acc[i, j] = 0.0
        m0 = blockIdx.y * 32
        n0 = blockIdx.x * 32
        steps = (k + 7) // 8
        for s in range(steps + 1):
            if s < steps:  # copy step s into stage s % 2 while step s - 1 is computed
                stage = s % 2
                k0 = s * 8
                for i, q in spatial(32, 2).on(threadIdx.x):  # a: 16-byte copies where k allows them
                    if m0 + i < m and k % 4 == 0 and k0 + q * 4 + 3 < k:
                        cp_async(~sa[stage, i, q * 4], ~a[m0 + i, k0 + q * 4], 16)
                    else:
                        for e in range(4):
                            inside = m0 + i < m and k0 + q * 4 + e < k
                            sa[stage, i, q * 4 + e] = a[m0 + i, k0 + q * 4 + e] if inside else 0.0
                for kk, j in LOAD_B.on(threadIdx.x):  # b: 4-byte copies
                    if k0 + kk < k and n0 + j < n:
                        cp_async(~sb[stage, kk, j], ~b[k0 + kk, n0 + j], 4)
                    else:
                        sb[stage, kk, j] = 0.0
            cp_async_commit_group()
            if s > 0:
                cp_async_wait_group(1)
                syncthreads()
                current = (s - 1) % 2
                for kk in range(8):
                    for i, j in TILE.on(threadIdx.x):
                        acc[i % 2, j % 4] += sa[current, i, kk] * sb[current, kk, j]
                syncthreads()
        for i, j in TILE.on(threadIdx.x):
            if m0 + i < m and n0 + j < n:
                c[m0 + i, n0 + j] = acc[i % 2, j % 4]


with hidet.script_module() as cuda_reduce_module:

    @hidet.script
    def row_sum(m: i32, n: i32, x: f32[m, n], y: f32[m]):  # noqa: F821
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 128
        attrs.cuda.grid_dim = (m + 3) // 4
        row = blockIdx.x * 4 + threadIdx.x / 32
        lane = threadIdx.x % 32
        total = 0.0
        if row < m:
            for j in range(lane, n, 32):
                total += x[row, j]
        for mask in (16, 8, 4, 2, 1):
            total += shfl_xor_sync(0xFFFFFFFF, total, mask)
        if lane == 0 and row < m:
            y[row] = total


@dataclass(frozen=True, eq=False)
class Anchor:
    """A scheduled kernel with what the tests need to run it: its inputs' and output's dimension names (the size
    parameters), and which of its dimensions are drawn."""

    module: IRModule
    target: str
    inputs: dict[str, tuple[str, ...]]
    output: tuple[str, tuple[str, ...]]

    @property
    def size_names(self) -> tuple[str, ...]:
        """The kernel's size parameters, in its order."""
        kernel = next(f for f in self.module.functions if f.attrs.kind in ("public", "cuda_kernel"))
        return tuple(p.name for p in kernel.params if p.name not in self.inputs and p.name != self.output[0])

    def shape(self, dims: tuple[str, ...], sizes: dict[str, int]) -> tuple[int, ...]:
        """The concrete shape of a tensor with dimension names `dims`."""
        return tuple(sizes[d] for d in dims)

    def reference(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """numpy's value of the anchor's output."""
        name = self.module.functions[-1].name
        if name == "scale_shift":
            return inputs["x"] * np.float32(2) + np.float32(1)
        if name == "row_sum":
            return inputs["x"].sum(axis=1, dtype=np.float32)
        return inputs["a"] @ inputs["b"]


ELEMENTWISE = Anchor(elementwise_module.ir_module(), "cpu", {"x": ("m", "n")}, ("y", ("m", "n")))
CPU_MATMUL = Anchor(cpu_matmul_module.ir_module(), "cpu", {"a": ("m", "k"), "b": ("k", "n")}, ("c", ("m", "n")))
CUDA_MATMUL = Anchor(cuda_matmul_module.ir_module(), "cuda", {"a": ("m", "k"), "b": ("k", "n")}, ("c", ("m", "n")))
CUDA_REDUCE = Anchor(cuda_reduce_module.ir_module(), "cuda", {"x": ("m", "n")}, ("y", ("m",)))
