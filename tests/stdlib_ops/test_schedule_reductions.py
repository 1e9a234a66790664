"""Lowered reductions declare each loop variable once: a computed tensor whose body holds a reduction, read by
two sibling reductions (or by two outputs, or inside and outside a warp reduction), builds with the IR verified
after every step on `cpu` and `cuda`, and equals numpy on hypothesis-drawn sizes and data."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.build import build_module
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.compute import arg_reduce, compute, reduce, tensor_input
from stdlib_ops.task import Task
from stdlib_ops.templates.registry import choose_schedule

A, J = 7, 5  # x is ['rows', A, J]; s[r, a] is the sum of x[r, a, :]
ROWS = st.sampled_from([1, 7, 33])
QUARTERS = st.sampled_from([q / 4 for q in range(-8, 9)])


def row_sums_task(name: str, define) -> Task:
    """A task over x ['rows', A, J] whose outputs `define(s)` makes from the computed row sums s ['rows', A]."""
    x = tensor_input("x", "float32", ["rows", A, J])
    s = compute("s", ["rows", A], lambda r, a: reduce([J], lambda j: x[r, a, j], "sum"))
    return Task(name, (x,), tuple(define(s)))


def spread_and_peak(s) -> list:
    """max - min of each row of s (sibling reductions over s), and the argmax of each row (a second output)."""
    spread = compute("spread", ["rows"], lambda r: reduce([A], lambda a: s[r, a], "max")
                     - reduce([A], lambda a: s[r, a], "min"))
    peak = compute("peak", ["rows"], lambda r: arg_reduce(A, lambda a: s[r, a], "max"))
    return [spread, peak]


def squared_deviations(s) -> list:
    """The sum over a row of s of (s - the row's mean)^2: one reduction at the top (a warp per row on CUDA)
    reading s both inside it and inside the mean it holds."""
    def at(r):
        mean = reduce([A], lambda b: s[r, b], "mean")
        return reduce([A], lambda a: (s[r, a] - mean) * (s[r, a] - mean), "sum")

    return [compute("deviation", ["rows"], at)]


@functools.cache
def built(name: str, target: str) -> object:
    define = {"spread_and_peak": spread_and_peak, "squared_deviations": squared_deviations}[name]
    return build_module(choose_schedule(row_sums_task(name, define), Target.of(target)).module, target, check=True)


def draw_x(data: st.DataObject) -> np.ndarray:
    rows = data.draw(ROWS, label="rows")
    values = data.draw(st.lists(QUARTERS, min_size=rows * A * J, max_size=rows * A * J), label="x")
    return np.array(values, np.float32).reshape(rows, A, J)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@settings(max_examples=example_count(5), deadline=None)
@given(data=st.data())
def test_sibling_reductions_of_one_computed_reduction(target: str, data: st.DataObject) -> None:
    x = draw_x(data)
    rows = x.shape[0]
    spread, peak = np.full(rows, np.nan, np.float32), np.full(rows, -1, np.int64)
    built("spread_and_peak", target)(rows, x, spread, peak)
    s = x.sum(axis=-1)
    # quarters summed in fives stay exact in f32, so the spread and the first maximum's index are exact
    np.testing.assert_array_equal(spread, s.max(axis=-1) - s.min(axis=-1))
    np.testing.assert_array_equal(peak, s.argmax(axis=-1))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@settings(max_examples=example_count(5), deadline=None)
@given(data=st.data())
def test_reduction_read_inside_and_outside_a_top_reduction(target: str, data: st.DataObject) -> None:
    x = draw_x(data)
    rows = x.shape[0]
    got = np.full(rows, np.nan, np.float32)
    built("squared_deviations", target)(rows, x, got)
    s = x.astype(np.float64).sum(axis=-1)
    expected = ((s - s.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
    # the mean (a division by 7) rounds, and the 7 squared deviations (each below 100) add in f32 in any order:
    # a few ulp of the sum, below 1e-5 relative plus 1e-5 absolute for sums that cancel to near 0
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
