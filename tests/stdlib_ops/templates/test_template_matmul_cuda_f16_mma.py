"""The tensor-core matmul template (f16 inputs, f32 accumulation) against numpy, on the emulator's checking mode
(no race, no out-of-bounds access, no uninitialized shared-memory read, ldmatrix rows included); its CUDA source
is also compiled by NVRTC for sm_80 and sm_90 (the suite's conftest), which checks the inline-PTX branch."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import F16_HALF_SUBNORMAL_STEP, assert_sum_close, data, sizes

from hidet_lang.testing import example_count
from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import matmul_cuda_f16_mma
from stdlib_ops.templates.params import ScheduleError

U = 2.0**-24  # f32's unit roundoff
H = 2.0**-11  # f16's unit roundoff


@cache
def built(*args, **kwargs):
    return matmul_cuda_f16_mma(*args, **kwargs).build(check=True)


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray, out_rounding: float) -> None:
    # products of halves are exact in f32; the sum of k of them in f32 is off by k * 2^-24 of the sum of their
    # sizes, and the result is rounded once to the output type (out_rounding of its size, below that sum)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    k = a.shape[-1]
    absolute = F16_HALF_SUBNORMAL_STEP if c.dtype == np.float16 else 0.0
    assert_sum_close(c, a64 @ b64, np.abs(a64) @ np.abs(b64), k, U + out_rounding / (k + 1), absolute)


@settings(max_examples=example_count(10), deadline=None)
@given(st.data(), st.sampled_from(["float16", "float32"]))
def test_symbolic_sizes_match_numpy(draw: st.DataObject, out_dtype: str) -> None:
    batch, m, n, k = draw.draw(sizes(2)), draw.draw(sizes(96)), draw.draw(sizes(96)), draw.draw(sizes(96))
    a = data(draw.draw, (batch, m, k), "float16")
    b = data(draw.draw, (batch, k, n), "float16")
    c = np.full((batch, m, n), np.nan, out_dtype)
    built("batch", "m", "n", "k", out_dtype)(batch, m, k, n, a, b, c)  # sizes in order of appearance
    check(c, a, b, H if out_dtype == "float16" else U)


def test_every_fragment_element_lands_in_its_place() -> None:
    # small integers: every product and sum is exact, so a misplaced fragment element is an exact mismatch
    a = (np.arange(2 * 45 * 37).reshape(2, 45, 37) % 13 - 6).astype(np.float16)
    b = (np.arange(2 * 37 * 29).reshape(2, 37, 29) % 11 - 5).astype(np.float16)
    c = np.full((2, 45, 29), np.nan, np.float32)
    built(2, 45, 29, 37, "float32", warps_m=1, warps_n=2, mma_m=3, mma_n=1)(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


def test_schedule_parameters_it_cannot_honour_are_refused() -> None:
    with pytest.raises(ScheduleError, match="2048 threads"):
        matmul_cuda_f16_mma(1, 8, 8, 8, warps_m=8, warps_n=8)
    with pytest.raises(ScheduleError, match="dtype bfloat16 is not supported"):
        matmul_cuda_f16_mma(1, 8, 8, 8, out_dtype="bfloat16")
