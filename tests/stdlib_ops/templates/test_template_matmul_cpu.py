"""The CPU matmul template against numpy, built in the checking mode (every access bounds-checked): symbolic
sizes (one build serves every shape), sizes known at build time, small blocks (many edge tiles), half precision."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import F16_HALF_SUBNORMAL_STEP, assert_sum_close, data, sizes

from stdlib_ops.templates.matmul_cpu import matmul_cpu
from stdlib_ops.templates.params import ScheduleError


@cache
def built_matmul(batch, m, n, k, dtype: str = "float32", **blocks: int):
    return matmul_cpu(batch, m, n, k, dtype, **blocks).build(check=True)


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray, unit: float = 2.0**-24, absolute: float = 0.0) -> None:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_sum_close(c, a64 @ b64, np.abs(a64) @ np.abs(b64), a.shape[-1], unit, absolute)


@settings(max_examples=15, deadline=None)
@given(st.data(), st.sampled_from([{}, {"block_m": 4, "block_n": 8, "block_k": 3}]))
def test_symbolic_sizes_match_numpy(draw: st.DataObject, blocks: dict[str, int]) -> None:
    batch, m, n, k = draw.draw(sizes(3)), draw.draw(sizes(300)), draw.draw(sizes(300)), draw.draw(sizes(300))
    a = data(draw.draw, (batch, m, k))
    b = data(draw.draw, (batch, k, n))
    c = np.full((batch, m, n), np.nan, np.float32)
    built_matmul("batch", "m", "n", "k", **blocks)(batch, m, k, n, a, b, c)  # sizes in order of appearance
    check(c, a, b)


@settings(max_examples=4, deadline=None)
@given(st.data())
def test_constant_sizes_match_numpy(draw: st.DataObject) -> None:
    a = data(draw.draw, (3, 33, 257))
    b = data(draw.draw, (3, 257, 7))
    c = np.full((3, 33, 7), np.nan, np.float32)
    built_matmul(3, 33, 7, 257)(a, b, c)
    check(c, a, b)


@settings(max_examples=5, deadline=None)
@given(st.data())
def test_half_precision_accumulates_in_f32(draw: st.DataObject) -> None:
    m, n, k = draw.draw(sizes(64)), draw.draw(sizes(64)), draw.draw(sizes(300))
    a = data(draw.draw, (1, m, k), "float16")
    b = data(draw.draw, (1, k, n), "float16")
    c = np.zeros((1, m, n), np.float16)
    built_matmul(1, "m", "n", "k", "float16")(m, k, n, a, b, c)
    # exact products, an f32 sum (k * 2^-24), and one rounding to f16 (2^-11 of the result's magnitude)
    check(c, a, b, unit=2.0**-24 + 2.0**-11 / (k + 1), absolute=F16_HALF_SUBNORMAL_STEP)


def test_unsupported_parameters_are_refused() -> None:
    with pytest.raises(ScheduleError, match="dtype float64 is not supported"):
        matmul_cpu(1, 8, 8, 8, dtype="float64")
    with pytest.raises(ScheduleError, match="block sizes must be positive"):
        matmul_cpu(1, 8, 8, 8, block_k=0)
    with pytest.raises(ValueError, match="symbolic size 'm' must be an identifier"):
        matmul_cpu(1, "2m", 8, 8)
