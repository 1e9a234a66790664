"""Kernels with tensors declared by layout: CPU kernels and CUDA kernels (on the GPU, else the emulator, where
the emulator's checking mode also runs them), against numpy."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.runtime.cuda_backend import backend
from hidet_lang import (
    attrs,
    auto_map,
    column_major,
    f32,
    grid,
    i32,
    local_layout,
    register_tensor,
    row_major,
    spatial,
    strided_layout,
    tensor,
    tensor_pointer,
)
from hidet_lang.cuda import blockIdx, shared_tensor, syncthreads, threadIdx
from hidet_lang.passes.pipeline import lower
from hidet_lang.testing import arrays, check_kernel, example_count

SETTINGS = settings(max_examples=example_count(20), deadline=None)
on_emulator = pytest.mark.skipif(backend() != "emulator", reason="the checking mode is the emulator's")


def storage_order(layout, values: np.ndarray) -> np.ndarray:
    """The storage of a tensor with a one-to-one `layout` holding `values`: element `layout(*i)` is `values[i]`."""
    storage = np.zeros(layout.size, values.dtype)
    for index in np.ndindex(*layout.shape):
        storage[layout(*index)] = values[index]
    return storage


# ------------------------------------------------------------------------------------------------ CPU
COLUMN = column_major(4, 8)
TILED = row_major(2, 2) * column_major(2, 4)  # a 2x2 grid of column-major 2x4 tiles: shape (4, 8)
SHARED_ROWS = local_layout(4) * row_major(8)  # shape (32,), size 8: index i lives at i % 8

with hidet.script_module() as cpu_module:

    @hidet.script
    def through_layouts(a: f32[4, 8], out: f32[4, 8], raw_column: f32[32], raw_tiled: f32[32]):
        attrs.func_kind = "public"
        col = register_tensor(f32, layout=COLUMN)
        tiled = tensor(f32, [4, 8], layout=TILED)
        for i, j in grid(4, 8):
            col[i, j] = a[i, j]
            tiled[i, j] = a[i, j] * 2.0
        for i, j in grid(4, 8):
            out[i, j] = col[i, j] + tiled[i, j]
        col_storage = tensor_pointer(f32, [32], init=~col)  # the raw storage, in offset order
        tiled_storage = tensor_pointer(f32, [32], init=~tiled)
        for k in range(32):
            raw_column[k] = col_storage[k]
            raw_tiled[k] = tiled_storage[k]

    @hidet.script
    def last_writer_wins(a: f32[32], out: f32[32]):
        attrs.func_kind = "public"
        regs = register_tensor(f32, layout=SHARED_ROWS)  # 8 elements of storage for 32 indices
        for i in range(32):
            regs[i] = a[i]
        for i in range(32):
            out[i] = regs[i]


def through_layouts_ref(a, out, raw_column, raw_tiled) -> None:
    out[:] = a + a * np.float32(2)
    raw_column[:] = storage_order(COLUMN, a)
    raw_tiled[:] = storage_order(TILED, a * np.float32(2))


def last_writer_wins_ref(a, out) -> None:
    out[:] = np.tile(a[24:], 4)  # the last write to each of the 8 elements is from indices 24..31


def test_layout_tables() -> None:
    """The references above rely on these layouts storing the elements in distinct, non-row-major places."""
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    assert storage_order(COLUMN, a).tolist() == a.T.reshape(-1).tolist()
    assert storage_order(TILED, a)[:8].tolist() == [0, 8, 1, 9, 2, 10, 3, 11]
    assert sorted(storage_order(TILED, a).tolist()) == list(range(32))


@SETTINGS
@given(arrays("float32", (4, 8)))
def test_cpu_register_tensors_with_layouts(a: np.ndarray) -> None:
    z = np.zeros(32, np.float32)
    check_kernel(cpu_module.build()["through_layouts"], through_layouts_ref, a, np.zeros((4, 8), np.float32), z, z)


@SETTINGS
@given(arrays("float32", 32))
def test_cpu_local_layout_shares_storage_between_indices(a: np.ndarray) -> None:
    check_kernel(cpu_module.build()["last_writer_wins"], last_writer_wins_ref, a, np.zeros(32, np.float32))


def test_cpu_local_arrays_are_sized_by_the_layout() -> None:
    source = cpu_module.build().source()
    assert re.search(r"float regs\w*\[8\];", source), source
    assert re.search(r"float col\w*\[32\];", source)


# ------------------------------------------------------------------------------------------------ CUDA: matmul
BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 8
TILE = spatial(16, 16).repeat(4, 4)  # 256 threads, a 4x4 patch each
ACC = local_layout(16, 16) * row_major(4, 4)  # mirrors TILE: 16 registers per thread
load_a = auto_map(BLOCK_M, BLOCK_K, workers=256)
load_b = auto_map(BLOCK_K, BLOCK_N, workers=256)

with hidet.script_module() as matmul_module:

    @hidet.script
    def matmul(m: i32, n: i32, k: i32, a: f32[m, k], b: f32[k, n], c: f32[m, n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 256
        attrs.cuda.grid_dim = ((n + BLOCK_N - 1) // BLOCK_N, (m + BLOCK_M - 1) // BLOCK_M)
        smem_a = shared_tensor(f32, [BLOCK_M, BLOCK_K])
        smem_b = shared_tensor(f32, layout=row_major(BLOCK_K, BLOCK_N))
        acc = register_tensor(f32, layout=ACC)  # shape (64, 64): indexed with TILE's task coordinates
        for i, j in TILE.on(threadIdx.x):
            acc[i, j] = 0.0
        m0 = blockIdx.y * BLOCK_M
        n0 = blockIdx.x * BLOCK_N
        for k0 in range(0, k, BLOCK_K):
            for i, kk in load_a.on(threadIdx.x):
                smem_a[i, kk] = a[m0 + i, k0 + kk] if m0 + i < m and k0 + kk < k else 0.0
            for kk, j in load_b.on(threadIdx.x):
                smem_b[kk, j] = b[k0 + kk, n0 + j] if k0 + kk < k and n0 + j < n else 0.0
            syncthreads()
            for kk in range(BLOCK_K):
                for i, j in TILE.on(threadIdx.x):
                    acc[i, j] += smem_a[i, kk] * smem_b[kk, j]
            syncthreads()
        for i, j in TILE.on(threadIdx.x):
            if m0 + i < m and n0 + j < n:
                c[m0 + i, n0 + j] = acc[i, j]


def matmul_ref(m, n, k, a, b, c) -> None:
    c[:] = a @ b


@settings(max_examples=example_count(6), deadline=None)
@given(st.tuples(st.integers(1, 130), st.integers(1, 130), st.integers(1, 20)).flatmap(
    lambda s: st.tuples(st.just(s), arrays("float32", (s[0], s[2])), arrays("float32", (s[2], s[1])))))
def test_cuda_matmul_with_a_layout_accumulator(case) -> None:
    (m, n, k), a, b = case
    c = np.zeros((m, n), np.float32)
    # float32 sums of k products in another order than BLAS
    check_kernel(matmul_module.build(), matmul_ref, m, n, k, a, b, c, rtol=1e-4, atol=1e-4 * k)


def test_the_accumulator_uses_the_layouts_storage() -> None:
    device, _ = emit_cuda(plan_module(lower(matmul_module.ir_module())), emulator=True, check=True)
    assert re.search(r"float acc\w*\[16\];", device), device
    # the checked accesses bound `acc` by its storage (16), not by its shape (64 * 64)
    assert re.search(r"hl_emu_checked\(acc\w*, [^;]*, 16LL,", device)
    assert "4096LL" not in device


@on_emulator
def test_cuda_matmul_with_a_layout_accumulator_passes_the_checking_mode() -> None:
    rng = np.random.default_rng(0)
    m, n, k = 70, 90, 13
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.zeros((m, n), np.float32)
    matmul_module.build(check=True)(m, n, k, a, b, c)
    # float32 sums of k products in another order than numpy's BLAS
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5 * k)


# ------------------------------------------------------------------------------------------- CUDA: the issue's layout
WARP_MAPPING = spatial(4, 2).repeat(2, 2).spatial(2, 16).repeat(4, 4)  # 256 threads, task shape (64, 256)
WARP_LAYOUT = local_layout(4, 2) * row_major(2, 2) * local_layout(2, 16) * row_major(4, 4)  # size 64

with hidet.script_module() as registers_module:

    @hidet.script
    def each_thread_holds_64(out: f32[64, 256]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 256
        attrs.cuda.grid_dim = 1
        regs = register_tensor(f32, layout=WARP_LAYOUT)
        for i, j in WARP_MAPPING.on(threadIdx.x):
            regs[i, j] = i * 256.0 + j  # a collision of two tasks in one register would lose one of them
        for i, j in WARP_MAPPING.on(threadIdx.x):
            out[i, j] = regs[i, j]


def test_cuda_registers_mirroring_the_issues_mapping() -> None:
    out = np.full((64, 256), np.nan, np.float32)
    registers_module.build()(out)
    np.testing.assert_array_equal(out, np.arange(64 * 256, dtype=np.float32).reshape(64, 256))


@on_emulator
def test_cuda_registers_mirroring_the_issues_mapping_pass_the_checking_mode() -> None:
    out = np.full((64, 256), np.nan, np.float32)
    registers_module.build(check=True)(out)
    np.testing.assert_array_equal(out, np.arange(64 * 256, dtype=np.float32).reshape(64, 256))


# ----------------------------------------------------------------------------------------- CUDA: padded shared memory
PADDED = strided_layout([32, 8], strides=[9, 1])  # 8 columns, one pad element per row: size 31 * 9 + 8 = 287

with hidet.script_module() as transpose_module:

    @hidet.script
    def transpose_32x8(a: f32[32, 8], out: f32[8, 32]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 256
        attrs.cuda.grid_dim = 1
        tile = shared_tensor(f32, layout=PADDED)
        staged = tensor(f32, layout=column_major(32, 8), scope="shared")
        for i, j in spatial(32, 8).on(threadIdx.x):
            tile[i, j] = a[i, j]
            staged[i, j] = a[i, j] + 1.0
        syncthreads()
        for j, i in spatial(8, 32).on(threadIdx.x):
            out[j, i] = tile[i, j] + staged[i, j]


def transpose_ref(a, out) -> None:
    out[:] = (a + (a + np.float32(1))).T


@settings(max_examples=example_count(5), deadline=None)
@given(arrays("float32", (32, 8)))
def test_cuda_padded_shared_tensor(a: np.ndarray) -> None:
    check_kernel(transpose_module.build(), transpose_ref, a, np.zeros((8, 32), np.float32))


@on_emulator
def test_cuda_padded_shared_tensor_passes_the_checking_mode() -> None:
    # offsets reach 286, past prod(shape) = 256: bounds taken from the shape would report them
    a = np.arange(256, dtype=np.float32).reshape(32, 8)
    out = np.zeros((8, 32), np.float32)
    transpose_module.build(check=True)(a, out)
    transpose_ref(a, expected := np.zeros_like(out))
    np.testing.assert_array_equal(out, expected)
