"""The CPU reduction templates (rows: trailing axes; columns: axes followed by others) against float64 numpy, through
one build with symbolic sizes per kind: the odd sizes (1, 3, 17, 255, 1000) in every combination, rows taken in
chunks, strips narrowed for parallel work, hypothesis-drawn shapes and data, f16 storage, the checking mode, and
the public operators choosing them (a fused prologue and epilogue included).

Error bounds from the arithmetic: a sum of n f32 terms in any order is within (n + 1) * 2^-24 of the sum of their
magnitudes (`assert_sum_close`); a mean adds the rounding of one division (2^-24 of the result); max and min are
exact (a value of the input, NaN where the values hold one, as numpy's); an f16 result adds one rounding to f16
(2^-11 of it)."""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import F16_HALF_SUBNORMAL_STEP, H, U, assert_sum_close, data, sizes

import stdlib_ops as ops
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.templates.kernels.reduction_cpu import REDUCTION_CPU_KINDS, reduce_columns_cpu, reduce_rows_cpu
from stdlib_ops.templates.registry import choose_schedule

ODD = (1, 3, 17, 255, 1000)
KINDS = sorted(REDUCTION_CPU_KINDS)


@cache
def rows_kernel(kind: str, dtype: str = "float32", chunk: int = 4096, check: bool = False) -> object:
    return reduce_rows_cpu("outer", "extent", kind, dtype, chunk=chunk).build(check=check)


@cache
def columns_kernel(kind: str, dtype: str = "float32", chunk: int = 1024, check: bool = False) -> object:
    return reduce_columns_cpu("outer", "extent", "inner", kind, dtype, chunk=chunk).build(check=check)


def reduce_rows(kind: str, x: np.ndarray, **options: object) -> np.ndarray:
    y = np.full(x.shape[0], np.nan, x.dtype)
    rows_kernel(kind, str(x.dtype), **options)(*x.shape, x, y)
    return y


def reduce_columns(kind: str, x: np.ndarray, **options: object) -> np.ndarray:
    y = np.full((x.shape[0], x.shape[2]), np.nan, x.dtype)
    columns_kernel(kind, str(x.dtype), **options)(*x.shape, x, y)
    return y


def check(kind: str, got: np.ndarray, x: np.ndarray, axis: object, keepdims: bool = False) -> None:
    """`got` within f32's error of `kind` over `axis` (an int, a tuple or None) of `x` (float64), plus f16's
    rounding for an f16 result."""
    x64 = x.astype(np.float64)
    half = H if x.dtype == np.float16 else 0.0
    if kind in ("max", "min"):
        exact = getattr(np, kind)(x64, axis=axis, keepdims=keepdims)
        assert got.shape == exact.shape
        np.testing.assert_array_equal(got.astype(np.float64), exact)
        return
    total, magnitude = x64.sum(axis=axis, keepdims=keepdims), np.abs(x64).sum(axis=axis, keepdims=keepdims)
    assert got.shape == total.shape
    n = x.size // max(total.size, 1)
    if kind == "mean":
        total, magnitude = total / n, magnitude / n
    result_rounding = (U if kind == "mean" else 0.0) + half
    subnormal = F16_HALF_SUBNORMAL_STEP if half else 0.0
    assert_sum_close(got, total, magnitude, n, absolute=result_rounding * np.abs(total) + subnormal)


@pytest.mark.parametrize("kind", KINDS)
def test_rows_at_every_odd_size(kind: str) -> None:
    rng = np.random.default_rng(0)
    for outer, extent in itertools.product(ODD, ODD):
        x = rng.uniform(-1, 1, (outer, extent)).astype(np.float32)
        check(kind, reduce_rows(kind, x), x, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_columns_at_every_odd_size(kind: str) -> None:
    rng = np.random.default_rng(1)
    for outer, extent, inner in itertools.product((1, 3), ODD, (2, 17, 1000)):
        x = rng.uniform(-1, 1, (outer, extent, inner)).astype(np.float32)
        check(kind, reduce_columns(kind, x), x, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_small_chunks_and_strips_in_the_checking_mode(kind: str) -> None:
    """Rows taken 8 values at a time and strips of at most 16 or 8 columns (several work items a row; a strip is
    never wider than the chunk, narrowed to give both cores work or not), every element access bounds-checked."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (5, 37)).astype(np.float32)
    check(kind, reduce_rows(kind, x, chunk=8, check=True), x, 1)
    x3 = rng.uniform(-1, 1, (2, 9, 37)).astype(np.float32)
    check(kind, reduce_columns(kind, x3, chunk=16, check=True), x3, 1)
    check(kind, reduce_columns(kind, x3[:, :, :10].copy(), chunk=8, check=True), x3[:, :, :10], 1)


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("chunk", [8, 4096])
def test_a_nan_anywhere_gives_nan_and_infinities_are_values(kind: str, chunk: int) -> None:
    """np.max/np.min: one NaN makes the row's (column's) result NaN, wherever it lies: in the vector loop's two
    accumulators, its single-vector step, the scalar tail, the first or a later chunk (chunk 8), the first row
    of a column. Rows of +-inf alone, and all -inf, are ordinary values."""
    extent = 83  # 16 lanes: 0..63 the paired vectors, 64..79 one vector, 80..82 scalars (8 lanes: likewise)
    positions = (0, 5, 17, 40, 70, 81, 82)
    x = np.random.default_rng(3).uniform(-1, 1, (len(positions) + 3, extent)).astype(np.float32)
    for row, p in enumerate(positions):
        x[row, p] = np.nan
    x[-3, [2, 50, 80]] = [np.inf, -np.inf, np.inf]
    x[-2, :] = -np.inf
    x[-1, [1, 60]] = np.nan
    check(kind, reduce_rows(kind, x, chunk=chunk), x, 1)
    columns = np.ascontiguousarray(x.T).reshape(1, extent, -1)  # x's rows as the columns
    check(kind, reduce_columns(kind, columns, chunk=chunk if chunk == 8 else 1024), columns, 1)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=example_count(6), deadline=None)
@given(draw=st.data())
def test_drawn_shapes_and_data(kind: str, draw: st.DataObject) -> None:
    outer, extent, inner = draw.draw(sizes(40)), draw.draw(sizes(300)), draw.draw(sizes(70))
    scale = draw.draw(st.sampled_from([1.0, 1e4]))
    x = data(draw.draw, (outer, extent, inner), scale=scale)
    check(kind, reduce_columns(kind, x), x, 1)
    flat = np.ascontiguousarray(x.reshape(outer, extent * inner))
    check(kind, reduce_rows(kind, flat), flat, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_half_precision_sums_in_f32(kind: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (7, 257)).astype(np.float16)
    check(kind, reduce_rows(kind, x), x, 1)
    x3 = rng.uniform(-1, 1, (3, 257, 33)).astype(np.float16)
    check(kind, reduce_columns(kind, x3), x3, 1)


# --------------------------------------------------------------------------------------- through the operators

CASES = [  # (shape, axis, keepdims, the template expected)
    ((4096, 1024), -1, False, "reduce_rows_cpu"),
    ((4096, 1024), 0, False, "reduce_columns_cpu"),
    ((3, 5, 7), (1, 2), True, "reduce_rows_cpu"),
    ((3, 5, 7), 1, True, "reduce_columns_cpu"),
    ((3, 5, 7), None, False, "reduce_rows_cpu"),
    ((2, 3, 4, 5), (1, 2), False, "reduce_columns_cpu"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("shape", "axis", "keepdims", "template"), CASES, ids=str)
def test_operators_choose_the_templates(kind: str, shape: tuple, axis: object, keepdims: bool,
                                        template: str) -> None:
    x = np.random.default_rng(4).uniform(-1, 1, shape).astype(np.float32)
    check(kind, getattr(ops, kind)(ops.asarray(x), axis=axis, keepdims=keepdims).numpy(), x, axis, keepdims)
    task = getattr(ops, kind)(ops.symbol(list(shape)), axis=axis, keepdims=keepdims).producer.task
    assert the_kernel(choose_schedule(task, Target.of("cpu")).module).name == template


def test_other_reductions_go_to_the_rule_based_scheduler() -> None:
    s = ops.symbol([3, 5, 7])
    declined = {"axes not next to each other": ops.sum(s, axis=(0, 2)), "a product": ops.prod(s, axis=-1),
                "integers": ops.sum(ops.symbol([3, 5], "int32"), axis=-1)}
    for what, y in declined.items():
        name = the_kernel(choose_schedule(y.producer.task, Target.of("cpu")).module).name
        assert "reduce_" not in name, what


def test_a_prologue_and_an_epilogue_fuse_into_one_kernel() -> None:
    x = np.random.default_rng(5).uniform(-1, 1, (33, 257)).astype(np.float32)
    s = ops.symbol(["rows", 257])
    compiled = ops.optimize(ops.trace_from(ops.relu(ops.sum(s * 2.0 + 1.0, axis=-1) - 200.0), [s])).build("cpu")
    assert len(compiled.kernels) == 1, compiled.kernels
    terms = x.astype(np.float64) * 2 + 1
    expected = np.maximum(terms.sum(axis=-1) - 200, 0)
    bound = (257 + 3) * U * np.abs(terms).sum(axis=-1) + 1e-30
    assert (np.abs(compiled(x).numpy() - expected) <= bound).all()
