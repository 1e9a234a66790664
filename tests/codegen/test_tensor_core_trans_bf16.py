"""The transposed ldmatrix (`ldmatrix_x4_trans`) and the bf16 tensor-core mma (`mma_m16n8k16_bf16_f32`) in DSL
kernels, run where CUDA modules run (the GPU, else the emulator), against numpy; B fragments come from a row-major
k x n tile in shared memory through the transposed ldmatrix, as the tensor-core matmul template loads them. The
suite's conftest also compiles every module with NVRTC for sm_80 and sm_90a (the inline-PTX branch)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, bf16, f16, f32, i32, register_tensor, u32
from hidet_lang.cuda import (
    ldmatrix_x4,
    ldmatrix_x4_trans,
    mma_m16n8k16_bf16_f32,
    mma_m16n8k16_f16_f32,
    shared_tensor,
    syncwarp,
    threadIdx,
)
from hidet_lang.testing import arrays, example_count

with hidet.script_module() as trans_module:

    @hidet.script
    def ldmatrix_trans_dump(x: f16[32, 8], rows: i32[32], out: u32[32, 4]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        lane = threadIdx.x
        smem = shared_tensor(f16, [32, 8])
        for j in range(8):
            smem[lane, j] = x[lane, j]
        syncwarp()
        regs = register_tensor(u32, [4])
        ldmatrix_x4_trans(~regs[0], ~smem[rows[lane], 0])
        for i in range(4):
            out[lane, i] = regs[i]


def mma_kernel(dtype, mma):
    """A module whose kernel `mma_tile(a, b, c)` computes c[16, 16] += a[16, 16] @ b[16, 16] with two mma n-tiles,
    A by `ldmatrix_x4` and both B fragments by one `ldmatrix_x4_trans` of the row-major b."""
    with hidet.script_module() as module:

        @hidet.script
        def mma_tile(a: dtype[16, 16], b: dtype[16, 16], c: f32[16, 16]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            lane = threadIdx.x
            sa = shared_tensor(dtype, [16, 16])
            sb = shared_tensor(dtype, [16, 16])
            for j in range(8):
                sa[lane / 2, lane % 2 * 8 + j] = a[lane / 2, lane % 2 * 8 + j]
                sb[lane / 2, lane % 2 * 8 + j] = b[lane / 2, lane % 2 * 8 + j]
            syncwarp()
            ra = register_tensor(u32, [4])
            rb = register_tensor(u32, [2, 2])
            rc = register_tensor(f32, [2, 4])
            ldmatrix_x4(~ra[0], ~sa[lane % 16, 8 * (lane / 16)])
            ldmatrix_x4_trans(~rb[0, 0], ~sb[lane % 16, 8 * (lane / 16)])
            for t in range(2):
                for e in range(4):
                    rc[t, e] = c[lane / 4 + 8 * (e / 2), 8 * t + 2 * (lane % 4) + e % 2]
                mma(~ra[0], ~rb[t, 0], ~rc[t, 0])
                for e in range(4):
                    c[lane / 4 + 8 * (e / 2), 8 * t + 2 * (lane % 4) + e % 2] = rc[t, e]

    return module


MMA_BUILT = {"float16": mma_kernel(f16, mma_m16n8k16_f16_f32).build(),
             "bfloat16": mma_kernel(bf16, mma_m16n8k16_bf16_f32).build()}


@settings(max_examples=example_count(6), deadline=None)
@given(arrays("uint16", st.just((32, 8))), st.permutations(list(range(32))))
def test_ldmatrix_x4_trans_fragment_layout(bits: np.ndarray, perm: list[int]) -> None:
    rows = np.array(perm, np.int32)
    out = np.zeros((32, 4), np.uint32)
    trans_module.build()(bits.view(np.float16), rows, out)
    # matrix i, row r is the row lane 8i + r addressed; lane l gets element l / 4 of rows 2t and 2t + 1 of matrix i
    expected = np.zeros((32, 4), np.uint32)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            lo, hi = bits[rows[8 * i + 2 * t], g], bits[rows[8 * i + 2 * t + 1], g]
            expected[lane, i] = int(lo) | (int(hi) << 16)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mma_with_b_by_ldmatrix_trans_distinguishes_every_element(dtype: str) -> None:
    # small integers (every product and sum exact in f32 and in both input types): a misplaced element shows
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    a = (np.arange(256).reshape(16, 16) % 13 - 6).astype(np_dtype)
    b = (np.arange(256).reshape(16, 16) % 11 - 5).astype(np_dtype)
    c0 = np.arange(256, dtype=np.float32).reshape(16, 16)
    c = c0.copy()
    MMA_BUILT[dtype](a, b, c)
    np.testing.assert_array_equal(c, c0 + a.astype(np.float32) @ b.astype(np.float32))


@settings(max_examples=example_count(6), deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_bf16_mma_matches_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-4, 4, (16, 16)).astype(ml_dtypes.bfloat16)
    b = rng.uniform(-4, 4, (16, 16)).astype(ml_dtypes.bfloat16)
    c0 = rng.uniform(-4, 4, (16, 16)).astype(np.float32)
    c = c0.copy()
    MMA_BUILT["bfloat16"](a, b, c)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    # products of bf16s are exact in f32; C and the 16 products are summed in f32 in an order the GPU does not
    # specify: 16 roundings of 2^-24 of a partial sum bounded by |C| + sum |a b|
    bound = 16 * 2.0**-24 * (np.abs(c0) + np.abs(a64) @ np.abs(b64))
    assert (np.abs(c - (c0 + a64 @ b64)) <= bound).all()


@pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")
def test_ldmatrix_trans_rows_are_reads_for_the_checking_mode() -> None:
    bits = np.arange(256, dtype=np.uint16).reshape(32, 8)
    out = np.zeros((32, 4), np.uint32)
    trans_module.build(check=True)(bits.view(np.float16), np.arange(32, dtype=np.int32), out)
    assert out[0, 0] == 0 | (8 << 16)  # lane 0: element 0 of rows 0 and 1
