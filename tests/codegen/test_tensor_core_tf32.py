"""The TF32 tensor-core primitives (mma m16n8k8 with tf32 operands, cvt.rna.tf32.f32) in DSL kernels, run where
CUDA modules run (the GPU, else the emulator), against numpy: the rounding of f32 to tf32 (nearest, ties away from
zero), the truncation an mma applies to operands that are not tf32 already, and the fragment layouts. Every module
here goes through `build()`, so the suite's conftest also compiles it with NVRTC for sm_80 and sm_90a."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, f32, i32, register_tensor
from hidet_lang.cuda import cvt_rna_tf32_f32, mma_m16n8k8_tf32_f32, threadIdx
from hidet_lang.errors import DSLTypeError
from hidet_lang.testing import arrays, example_count

LOW_BITS = np.uint32(0x1FFF)  # the 13 mantissa bits an f32 has beyond tf32's 10


def tf32_truncated(x: np.ndarray) -> np.ndarray:
    """f32 `x` with the lower 13 mantissa bits dropped."""
    return (x.astype(np.float32).view(np.uint32) & ~LOW_BITS).view(np.float32)


def tf32_rounded(x: np.ndarray) -> np.ndarray:
    """f32 `x` rounded to tf32, nearest with ties away from zero (NaN and infinity kept), computed in float64: the
    candidates are the truncation and the next tf32 value away from zero."""
    x = x.astype(np.float32)
    truncated = tf32_truncated(x)
    step = np.abs(np.spacing(np.abs(truncated))).astype(np.float64) * 2**13  # tf32's step there (subnormals too)
    down = truncated.astype(np.float64)
    up = down + np.copysign(step, x)
    rest = np.abs(x.astype(np.float64) - down)
    out = np.where(rest >= step / 2, up, down)
    out = np.where(np.isfinite(x), out, x)
    with np.errstate(over="ignore"):
        return out.astype(np.float32)


with hidet.script_module() as tf32_module:

    @hidet.script
    def mma_tf32(a: f32[16, 8], b: f32[8, 8], c: f32[16, 8], rounded: i32):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        lane = threadIdx.x
        g = lane / 4
        t = lane % 4
        ra = register_tensor(f32, [4])
        rb = register_tensor(f32, [2])
        rc = register_tensor(f32, [4])
        for r in range(4):
            ra[r] = a[g + 8 * (r % 2), t + 4 * (r / 2)]
            rc[r] = c[g + 8 * (r / 2), 2 * t + r % 2]
        for r in range(2):
            rb[r] = b[t + 4 * r, g]
        if rounded != 0:
            for r in range(4):
                ra[r] = cvt_rna_tf32_f32(ra[r])
            for r in range(2):
                rb[r] = cvt_rna_tf32_f32(rb[r])
        mma_m16n8k8_tf32_f32(~ra[0], ~rb[0], ~rc[0])
        for r in range(4):
            c[g + 8 * (r / 2), 2 * t + r % 2] = rc[r]

    @hidet.script
    def round_each(x: f32[256], y: f32[256]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 256
        attrs.cuda.grid_dim = 1
        y[threadIdx.x] = cvt_rna_tf32_f32(x[threadIdx.x])


with hidet.script_module() as partial_module:

    @hidet.script
    def mma_in_a_partial_warp(x: f32[48, 4]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 48
        attrs.cuda.grid_dim = 1
        ra = register_tensor(f32, [4])
        rb = register_tensor(f32, [2])
        rc = register_tensor(f32, [4])
        for r in range(4):
            ra[r] = 0.0
            rc[r] = 0.0
        for r in range(2):
            rb[r] = 0.0
        mma_m16n8k8_tf32_f32(~ra[0], ~rb[0], ~rc[0])
        for r in range(4):
            x[threadIdx.x, r] = rc[r]


BUILT = tf32_module.build()

finite = arrays("float32", st.just((16, 8)), elements=st.floats(-1e4, 1e4, width=32))


def check_mma(a: np.ndarray, b: np.ndarray, c0: np.ndarray, c: np.ndarray) -> None:
    # `a` and `b` are tf32 already: their products are exact in f32 (11-bit significands) unless they fall below
    # f32's normal range, where each rounds to the subnormal step (at most half of it, 2^-150, off); the 8 products
    # and C are summed in f32 in an order the GPU does not specify: each of the 8 additions rounds with a relative
    # error of at most 2^-24 of a partial sum bounded by |C| + sum |A_ik B_kj| (exact among subnormals)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = c0.astype(np.float64) + a64 @ b64
    bound = np.abs(c0) + np.abs(a64) @ np.abs(b64)
    err = np.abs(c.astype(np.float64) - exact)
    assert (err <= 8 * 2.0**-24 * bound + 8 * 2.0**-150).all(), f"max error {err.max()} (bound {bound.max()})"


@settings(max_examples=example_count(8), deadline=None)
@given(finite, finite.map(lambda x: x[:8]), finite)
def test_mma_truncates_operands_that_are_not_tf32(a: np.ndarray, b: np.ndarray, c0: np.ndarray) -> None:
    c = c0.copy()
    BUILT["mma_tf32"](a, b, c, 0)
    check_mma(tf32_truncated(a), tf32_truncated(b), c0, c)


@settings(max_examples=example_count(8), deadline=None)
@given(finite, finite.map(lambda x: x[:8]), finite)
def test_mma_of_rounded_operands_matches_numpy(a: np.ndarray, b: np.ndarray, c0: np.ndarray) -> None:
    c = c0.copy()
    BUILT["mma_tf32"](a, b, c, 1)
    check_mma(tf32_rounded(a), tf32_rounded(b), c0, c)


def test_mma_distinguishes_every_element() -> None:
    # small integers (every sum exact in f32): a misplaced fragment element shows as an exact mismatch
    a = (np.arange(128).reshape(16, 8) % 13 - 6).astype(np.float32)
    b = (np.arange(64).reshape(8, 8) % 11 - 5).astype(np.float32)
    c0 = np.arange(128, dtype=np.float32).reshape(16, 8)
    c = c0.copy()
    BUILT["mma_tf32"](a, b, c, 0)
    np.testing.assert_array_equal(c, c0 + a @ b)


@settings(max_examples=example_count(8), deadline=None)
@given(arrays("uint32", st.just((256,)), elements=st.integers(0, 2**32 - 1)))
def test_cvt_rna_rounds_to_nearest_with_ties_away_from_zero(bits: np.ndarray) -> None:
    x = bits.view(np.float32)
    y = np.zeros(256, np.float32)
    BUILT["round_each"](x, y)
    expected = tf32_rounded(x)
    finite = np.isfinite(x)
    np.testing.assert_array_equal(y[finite].view(np.uint32), expected[finite].view(np.uint32))
    np.testing.assert_array_equal(np.isnan(y), np.isnan(x))  # NaN stays NaN (its payload is not specified)


def test_cvt_rna_at_the_edges() -> None:
    one = np.float32(1.0)
    step = np.float32(2.0**-10)  # a tf32 step at 1
    x = np.zeros(256, np.float32)
    cases = {
        0: (one + step / 2, one + step),  # a tie rounds away from zero
        1: (-(one + step / 2), -(one + step)),
        2: (np.nextafter(one + step / 2, np.float32(0)), one),  # just below a tie rounds down
        3: (np.float32(np.finfo(np.float32).max), np.float32(np.inf)),  # within half a step of the largest f32
        4: (np.float32(np.inf), np.float32(np.inf)),
        5: (np.float32(-0.0), np.float32(-0.0)),
        6: (np.float32(2.0**-130), np.float32(2.0**-130)),  # a subnormal tf32 value
        7: (np.float32(2.0**-137), np.float32(2.0**-136)),  # half the subnormal step: a tie, away from zero
    }
    for i, (value, _) in cases.items():
        x[i] = value
    y = np.zeros(256, np.float32)
    BUILT["round_each"](x, y)
    for i, (_, want) in cases.items():
        assert y[i].view(np.uint32) == np.float32(want).view(np.uint32), (i, x[i], y[i], want)


@pytest.mark.skipif(backend() != "emulator", reason="the emulator's report of a partial warp")
def test_emulator_rejects_mma_in_a_partial_warp() -> None:
    with pytest.raises(RuntimeError, match=r"mma_m16n8k8_tf32_f32.*partial warp.*all 32 lanes"):
        partial_module.build()(np.zeros((48, 4), np.float32))


def test_mma_rejects_operands_of_the_wrong_type() -> None:
    with pytest.raises(DSLTypeError, match=r"mma_m16n8k8_tf32_f32 \(a\) needs a pointer to float32"):

        @hidet.script
        def bad_operand(x: f32[4]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            ra = register_tensor(hidet.f16, [8])
            rb = register_tensor(f32, [2])
            rc = register_tensor(f32, [4])
            mma_m16n8k8_tf32_f32(~ra[0], ~rb[0], ~rc[0])
