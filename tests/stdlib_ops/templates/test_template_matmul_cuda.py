"""The CUDA matmul template against numpy, on the emulator's checking mode (no race, no out-of-bounds access, no
uninitialized shared-memory read): symbolic sizes (one build serves every shape), sizes known at build time,
half-precision inputs, and schedule parameters it refuses."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import F16_HALF_SUBNORMAL_STEP, assert_sum_close, data, sizes

from hidet_lang.ir.types import TensorType
from hidet_lang.testing import example_count
from stdlib_ops.templates.kernels.matmul_cuda import matmul_cuda
from stdlib_ops.templates.params import ScheduleError


@cache
def symbolic_matmul(dtype: str = "float32"):
    return matmul_cuda("batch", "m", "n", "k", dtype).build(check=True)


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray, unit: float = 2.0**-24, absolute: float = 0.0) -> None:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_sum_close(c, a64 @ b64, np.abs(a64) @ np.abs(b64), a.shape[-1], unit, absolute)


@settings(max_examples=example_count(12), deadline=None)
@given(st.data())
def test_symbolic_sizes_match_numpy(draw: st.DataObject) -> None:
    batch, m, n, k = draw.draw(sizes(3)), draw.draw(sizes(96)), draw.draw(sizes(96)), draw.draw(sizes(96))
    a = data(draw.draw, (batch, m, k))
    b = data(draw.draw, (batch, k, n))
    c = np.full((batch, m, n), np.nan, np.float32)
    symbolic_matmul()(batch, m, k, n, a, b, c)  # sizes in order of appearance in a, b
    check(c, a, b)


@settings(max_examples=example_count(4), deadline=None)
@given(st.data())
def test_constant_sizes_match_numpy(draw: st.DataObject) -> None:
    a = data(draw.draw, (2, 33, 257))
    b = data(draw.draw, (2, 257, 7))
    c = np.full((2, 33, 7), np.nan, np.float32)
    constant_matmul()(a, b, c)
    check(c, a, b)


@cache
def constant_matmul():
    return matmul_cuda(2, 33, 7, 257, block_m=32, block_n=32, block_k=16, thread_m=2, thread_n=4).build(check=True)


def test_symbolic_sizes_are_parameters_in_order_of_appearance() -> None:
    kernel = matmul_cuda(4, "rows", "cols", "rows").ir_module().functions[-1]
    names = [p.name for p in kernel.params]
    assert names == ["rows", "cols", "a", "b", "c"]
    a_type = kernel.params[2].var_type
    assert isinstance(a_type, TensorType) and str(a_type.shape[0]) == "4"


@settings(max_examples=example_count(4), deadline=None)
@given(st.data())
def test_half_inputs_accumulate_in_f32(draw: st.DataObject) -> None:
    batch, m, n, k = 1, draw.draw(sizes(40)), draw.draw(sizes(40)), draw.draw(sizes(96))
    a = data(draw.draw, (batch, m, k), "float16")
    b = data(draw.draw, (batch, k, n), "float16")
    c = np.zeros((batch, m, n), np.float16)
    symbolic_matmul("float16")(batch, m, k, n, a, b, c)
    # products of halves are exact in f32 and summed in f32 (k * 2^-24); the result is rounded once to f16
    # (2^-11 of its magnitude, below 2^-11 of the sum of absolute values)
    check(c, a, b, unit=2.0**-24 + 2.0**-11 / (k + 1), absolute=F16_HALF_SUBNORMAL_STEP)


def test_schedule_parameters_it_cannot_honour_are_refused() -> None:
    with pytest.raises(ScheduleError, match="thread tiles must divide"):
        matmul_cuda(1, 8, 8, 8, block_m=30, thread_m=4)
    with pytest.raises(ScheduleError, match="2048 threads"):
        matmul_cuda(1, 8, 8, 8, block_m=128, block_n=64, thread_m=2, thread_n=2)
    with pytest.raises(ScheduleError, match="dtype int32 is not supported"):
        matmul_cuda(1, 8, 8, 8, dtype="int32")
    with pytest.raises(ValueError, match="size 'k' must be positive"):
        matmul_cuda(1, 8, 8, 0)
