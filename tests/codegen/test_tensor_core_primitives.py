"""Tensor-core and asynchronous-copy primitives (mma m16n8k16, ldmatrix x4, cp.async) in DSL kernels, run where
CUDA modules run (the GPU, else the emulator), against numpy. Every module here goes through `build()`, so the
suite's conftest also compiles it with NVRTC for sm_80 and sm_90a (the inline-PTX branch of the primitives)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, f16, f32, i32, register_tensor, u32
from hidet_lang.cuda import (
    cp_async,
    cp_async_commit_group,
    cp_async_wait_all,
    cp_async_wait_group,
    ldmatrix_x4,
    mma_m16n8k16_f16_f32,
    shared_tensor,
    syncthreads,
    syncwarp,
    threadIdx,
)
from hidet_lang.errors import DSLTypeError, DSLValueError
from hidet_lang.testing import arrays, example_count

# The PTX fragment layouts of mma.m16n8k16 (f16 A row-major, f16 B column-major, f32 C), per lane l with
# g = l / 4 and t = l % 4; element e of a lane's f16 fragment is the half (e % 2) of 32-bit register e / 2.

with hidet.script_module() as mma_module:

    @hidet.script
    def a_row(lane: i32, e: i32) -> i32:
        attrs.func_kind = "cuda_internal"
        return lane / 4 + 8 * (e / 2 % 2)

    @hidet.script
    def a_col(lane: i32, e: i32) -> i32:
        attrs.func_kind = "cuda_internal"
        return 2 * (lane % 4) + e % 2 + 8 * (e / 4)

    @hidet.script
    def b_row(lane: i32, e: i32) -> i32:
        attrs.func_kind = "cuda_internal"
        return 2 * (lane % 4) + e % 2 + 8 * (e / 2)

    @hidet.script
    def c_row(lane: i32, e: i32) -> i32:
        attrs.func_kind = "cuda_internal"
        return lane / 4 + 8 * (e / 2)

    @hidet.script
    def c_col(lane: i32, e: i32) -> i32:
        attrs.func_kind = "cuda_internal"
        return 2 * (lane % 4) + e % 2

    @hidet.script
    def mma_from_global(a: f16[16, 16], b: f16[16, 8], c: f32[16, 8]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        lane = threadIdx.x
        ra = register_tensor(f16, [8])
        rb = register_tensor(f16, [4])
        rc = register_tensor(f32, [4])
        for e in range(8):
            ra[e] = a[a_row(lane, e), a_col(lane, e)]
        for e in range(4):
            rb[e] = b[b_row(lane, e), lane / 4]
        for e in range(4):
            rc[e] = c[c_row(lane, e), c_col(lane, e)]
        mma_m16n8k16_f16_f32(~ra[0], ~rb[0], ~rc[0])
        for e in range(4):
            c[c_row(lane, e), c_col(lane, e)] = rc[e]

    @hidet.script
    def mma_via_ldmatrix(a: f16[16, 16], b: f16[16, 8], c: f32[16, 8]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        lane = threadIdx.x
        smem = shared_tensor(f16, [16, 16])
        for j in range(8):
            smem[lane / 2, lane % 2 * 8 + j] = a[lane / 2, lane % 2 * 8 + j]
        syncwarp()
        ra = register_tensor(u32, [4])
        rb = register_tensor(f16, [4])
        rc = register_tensor(f32, [4])
        # lane l gives row l % 8 of 8x8 matrix l / 8: matrices A[0:8, 0:8], A[8:16, 0:8], A[0:8, 8:16], A[8:16, 8:16]
        ldmatrix_x4(~ra[0], ~smem[lane % 8 + 8 * (lane / 8 % 2), 8 * (lane / 16)])
        for e in range(4):
            rb[e] = b[b_row(lane, e), lane / 4]
        for e in range(4):
            rc[e] = c[c_row(lane, e), c_col(lane, e)]
        mma_m16n8k16_f16_f32(~ra[0], ~rb[0], ~rc[0])
        for e in range(4):
            c[c_row(lane, e), c_col(lane, e)] = rc[e]


with hidet.script_module() as ldmatrix_module:

    @hidet.script
    def ldmatrix_dump(x: f16[32, 8], rows: i32[32], out: u32[32, 4]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        lane = threadIdx.x
        smem = shared_tensor(f16, [32, 8])
        for j in range(8):
            smem[lane, j] = x[lane, j]
        syncwarp()
        regs = register_tensor(u32, [4])
        ldmatrix_x4(~regs[0], ~smem[rows[lane], 0])
        for i in range(4):
            out[lane, i] = regs[i]


with hidet.script_module() as cp_async_module:

    @hidet.script
    def cp_async_tile(x: f32[64, 7], y: f32[64, 7]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 64
        attrs.cuda.grid_dim = 1
        tile = shared_tensor(f32, [64, 8])
        t = threadIdx.x
        cp_async(~tile[t, 0], ~x[t, 0], 4)
        cp_async_commit_group()
        cp_async(~tile[t, 1], ~x[t, 1], 4)
        cp_async(~tile[t, 2], ~x[t, 2], 4)
        cp_async_commit_group()
        cp_async_wait_group(1)
        cp_async_wait_group(0)
        syncthreads()
        for j in range(7):
            y[63 - t, j] = 2.0 * tile[t, j] if j < 3 else -1.0


with hidet.script_module() as cp_async_global_module:

    @hidet.script
    def cp_async_copy(x: f32[64, 8], y: f32[64, 8]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 64
        attrs.cuda.grid_dim = 1
        tile = shared_tensor(f32, [64, 8])
        t = threadIdx.x
        cp_async(~tile[t, 0], ~x[t, 0], 16)
        cp_async(~tile[t, 4], ~x[t, 4], 8)
        cp_async(~tile[t, 6], ~x[t, 6], 4)
        cp_async(~tile[t, 7], ~x[t, 7], 4)
        cp_async_commit_group()
        cp_async_wait_all()
        syncthreads()
        for j in range(8):
            y[t, j] = 2.0 * tile[63 - t, 7 - j]


with hidet.script_module() as partial_module:

    @hidet.script
    def mma_partial_warp(c: f32[48, 4]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 48
        attrs.cuda.grid_dim = 1
        ra = register_tensor(u32, [4])
        rb = register_tensor(u32, [2])
        rc = register_tensor(f32, [4])
        for e in range(4):
            ra[e] = 0
            rc[e] = 0.0
        for e in range(2):
            rb[e] = 0
        mma_m16n8k16_f16_f32(~ra[0], ~rb[0], ~rc[0])
        for e in range(4):
            c[threadIdx.x, e] = rc[e]


halves = arrays("float16", st.just((16, 16)))
mma_built = mma_module.build()


def check_mma(a: np.ndarray, b: np.ndarray, c0: np.ndarray, c: np.ndarray) -> None:
    # Products of halves are exact in f32 (11-bit significands); the 16 products and C are summed in f32, whose
    # order the GPU does not specify: each of the 16 additions rounds with a relative error of at most 2^-24 of
    # a partial sum bounded by |C| + sum |A_ik B_kj|, so the error is below 16 * 2^-24 of that bound.
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = c0.astype(np.float64) + a64 @ b64
    bound = np.abs(c0) + np.abs(a64) @ np.abs(b64)
    err = np.abs(c.astype(np.float64) - exact)
    assert (err <= 16 * 2.0**-24 * bound + 1e-30).all(), f"max error {err.max()} (bound {bound.max()})"


@settings(max_examples=example_count(8), deadline=None)
@given(halves, arrays("float16", st.just((16, 8))), arrays("float32", st.just((16, 8))))
def test_mma_from_global_fragments_matches_numpy(a: np.ndarray, b: np.ndarray, c0: np.ndarray) -> None:
    c = c0.copy()
    mma_built["mma_from_global"](a, b, c)
    check_mma(a, b, c0, c)


@settings(max_examples=example_count(8), deadline=None)
@given(halves, arrays("float16", st.just((16, 8))), arrays("float32", st.just((16, 8))))
def test_mma_with_a_loaded_by_ldmatrix_matches_numpy(a: np.ndarray, b: np.ndarray, c0: np.ndarray) -> None:
    c = c0.copy()
    mma_built["mma_via_ldmatrix"](a, b, c)
    check_mma(a, b, c0, c)


def test_mma_distinguishes_every_element() -> None:
    # small integers (every sum exact in f32): a misplaced fragment element shows as an exact mismatch
    a = (np.arange(256).reshape(16, 16) % 13 - 6).astype(np.float16)
    b = (np.arange(128).reshape(16, 8) % 11 - 5).astype(np.float16)
    c0 = np.arange(128, dtype=np.float32).reshape(16, 8)
    for kernel in ("mma_from_global", "mma_via_ldmatrix"):
        c = c0.copy()
        mma_built[kernel](a, b, c)
        np.testing.assert_array_equal(c, c0 + a.astype(np.float32) @ b.astype(np.float32))  # small integers: exact


@settings(max_examples=example_count(6), deadline=None)
@given(arrays("uint16", st.just((32, 8)), elements=st.integers(0, 0x7BFF)), st.permutations(list(range(32))))
def test_ldmatrix_x4_fragment_layout(bits: np.ndarray, perm: list[int]) -> None:
    rows = np.array(perm, np.int32)
    out = np.zeros((32, 4), np.uint32)
    ldmatrix_module.build()(bits.view(np.float16), rows, out)
    # matrix i, row r is the row lane 8i + r addressed; lane l gets elements 2t, 2t+1 of row l / 4 of matrix i
    expected = np.zeros((32, 4), np.uint32)
    for lane in range(32):
        for i in range(4):
            row = bits[rows[8 * i + lane // 4]]
            t = lane % 4
            expected[lane, i] = int(row[2 * t]) | (int(row[2 * t + 1]) << 16)
    np.testing.assert_array_equal(out, expected)


with hidet.script_module() as ldmatrix_half_written_module:

    @hidet.script
    def ldmatrix_half_written(x: f16[32, 8], out: u32[32, 4]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        lane = threadIdx.x
        smem = shared_tensor(f16, [32, 8])
        if lane < 16:
            for j in range(8):
                smem[lane, j] = x[lane, j]
        syncwarp()
        regs = register_tensor(u32, [4])
        ldmatrix_x4(~regs[0], ~smem[lane, 0])  # rows 16-31 were never written
        for i in range(4):
            out[lane, i] = regs[i]


@pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")
def test_ldmatrix_rows_are_reads_for_the_checking_mode() -> None:
    bits = np.arange(256, dtype=np.uint16).reshape(32, 8)
    out = np.zeros((32, 4), np.uint32)
    ldmatrix_module.build(check=True)(bits.view(np.float16), np.arange(32, dtype=np.int32), out)
    assert out[0, 0] == 0 | (1 << 16)  # lane 0: elements 0 and 1 of row 0
    unwritten_row = r"thread (1[6-9]|2\d|3[01]): ldmatrix reads smem \(shared, declared at .*\), which no thread"
    with pytest.raises(RuntimeError, match=unwritten_row + " of the block has written: uninitialized shared memory"):
        ldmatrix_half_written_module.build(check=True)(bits.view(np.float16), out)


def test_cp_async_tile_then_barrier_then_use() -> None:
    x = np.random.randn(64, 8).astype(np.float32)
    y = np.full_like(x, np.nan)
    cp_async_global_module.build()(x, y)
    np.testing.assert_array_equal(y, 2 * x[::-1, ::-1])


def test_cp_async_groups_and_waits() -> None:
    x = np.random.randn(64, 7).astype(np.float32)
    y = np.full_like(x, np.nan)
    cp_async_module.build()(x, y)
    expected = np.full_like(x, -1.0)
    expected[:, :3] = 2 * x[::-1, :3]
    np.testing.assert_array_equal(y, expected)


@pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")
def test_cp_async_copies_are_writes_for_the_checking_mode() -> None:
    x = np.random.randn(64, 8).astype(np.float32)
    y = np.full_like(x, np.nan)
    cp_async_global_module.build(check=True)(x, y)  # its reads of the tile are of initialized, ordered data
    np.testing.assert_array_equal(y, 2 * x[::-1, ::-1])


with hidet.script_module() as cp_async_race_module:

    @hidet.script
    def cp_async_without_barrier(x: f32[64, 4], y: f32[64, 4]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 64
        attrs.cuda.grid_dim = 1
        tile = shared_tensor(f32, [64, 4])
        t = threadIdx.x
        cp_async(~tile[t, 0], ~x[t, 0], 16)
        cp_async_wait_all()
        y[t, 0] = tile[63 - t, 0]  # RACE: no barrier orders the other thread's copy before this read


@pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")
def test_reading_another_threads_cp_async_copy_without_a_barrier_is_a_race() -> None:
    x = np.random.randn(64, 4).astype(np.float32)
    with pytest.raises(RuntimeError, match=r"thread 0: reads tile\[252\] .*a race"):
        cp_async_race_module.build(check=True)(x, np.zeros_like(x))


with hidet.script_module() as cp_async_overlap_module:

    @hidet.script
    def cp_async_over_a_written_element(x: f32[4], y: f32[4]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        tile = shared_tensor(f32, [4])
        if threadIdx.x == 1:
            tile[1] = 1.0
        if threadIdx.x == 2:
            cp_async(~tile[0], ~x[0], 16)  # covers tile[1], which thread 1 wrote since the last barrier
        cp_async_wait_all()
        syncthreads()
        if threadIdx.x < 4:
            y[threadIdx.x] = tile[threadIdx.x]


@pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")
def test_a_race_on_any_byte_of_a_wide_access_is_reported() -> None:
    x = np.ones(4, np.float32)
    with pytest.raises(RuntimeError, match=r"thread 2: cp.async writes tile .* also written by thread 1 .* a race"):
        cp_async_overlap_module.build(check=True)(x, np.zeros_like(x))


def test_cp_async_rejects_other_sizes() -> None:
    with pytest.raises(DSLValueError, match="4, 8 or 16 bytes"):

        @hidet.script
        def bad_size(x: f32[4]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            tile = shared_tensor(f32, [4])
            cp_async(~tile[0], ~x[0], 12)


@pytest.mark.skipif(backend() != "emulator", reason="the emulator's report of a partial warp")
def test_emulator_rejects_mma_in_a_partial_warp() -> None:
    built = partial_module.build()
    with pytest.raises(RuntimeError, match=r"mma_m16n8k16_f16_f32.*partial warp.*all 32 lanes"):
        built(np.zeros((48, 4), np.float32))


def test_mma_rejects_operands_of_the_wrong_type() -> None:
    with pytest.raises(DSLTypeError, match=r"mma_m16n8k16_f16_f32 \(c\) needs a pointer to float32"):

        @hidet.script
        def bad_accumulator(x: f32[4]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            ra = register_tensor(u32, [4])
            rb = register_tensor(u32, [2])
            rc = register_tensor(f16, [8])
            mma_m16n8k16_f16_f32(~ra[0], ~rb[0], ~rc[0])
