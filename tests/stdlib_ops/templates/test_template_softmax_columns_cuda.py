"""Softmax and log-softmax over a leading or middle axis on CUDA (`softmax_columns_cuda`, coalesced strips of
columns) against float64 numpy on the emulator's checking mode, on hypothesis-drawn odd shapes; `ops.softmax` along
such an axis reaches the template, and along the last axis the row template."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import U, data

import stdlib_ops as ops
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.templates.kernels.softmax_columns_cuda import softmax_columns_cuda
from stdlib_ops.templates.registry import choose_schedule


@cache
def built(log: bool):
    return softmax_columns_cuda("outer", "extent", "inner", log=log, threads=64).build(check=True)


@pytest.mark.parametrize("log", [False, True])
@settings(max_examples=example_count(4), deadline=None)
@given(draw=st.data(), outer=st.sampled_from([1, 2]), extent=st.sampled_from([1, 7, 70]),
       inner=st.sampled_from([1, 5, 33, 70]))
def test_softmax_along_columns(log: bool, draw: st.DataObject, outer: int, extent: int, inner: int) -> None:
    x = data(draw.draw, (outer, extent, inner), scale=30.0)
    y = np.full_like(x, np.nan)
    built(log)(outer, extent, inner, x, y)
    shifted = x.astype(np.float64) - x.max(1, keepdims=True)
    log_total = np.log(np.exp(shifted).sum(1, keepdims=True))
    if log:
        # x - max - log(sum): two roundings of the terms' size, and log of a sum off by extent * 2^-24 relative
        bound = 4 * U * (np.abs(x) + np.abs(shifted) + np.abs(log_total)) + (extent + 8) * U
        assert (np.abs(y - (shifted - log_total)) <= bound).all()
    else:
        expected = np.exp(shifted - log_total)
        # exp of a shift rounded by 2^-24 of its size, a few ulps of exp, a sum of `extent` terms
        bound = expected * ((extent + 8) * U + 2 * U * np.abs(shifted)) + 2.0**-146
        assert (np.abs(y - expected) <= bound).all()


@pytest.mark.parametrize(("axis", "kernel"), [(0, "softmax_columns_cuda"), (1, "softmax_columns_cuda"),
                                              (2, "softmax_cuda")])
def test_softmax_of_ops_along_each_axis(axis: int, kernel: str) -> None:
    task = ops.softmax(ops.symbol([3, "n", 5]), axis=axis).producer.task
    assert the_kernel(choose_schedule(task, Target.of("cuda")).module).name == kernel
    x = np.random.default_rng(5).uniform(-3, 3, (3, 4, 5)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(axis, keepdims=True))
    np.testing.assert_allclose(ops.softmax(ops.asarray(x, device="cuda"), axis=axis).numpy(),
                               e / e.sum(axis, keepdims=True), rtol=20 * U, atol=2.0**-146)
